// Bottleneck's own limiter (the version package-lock.json pins) on an
// ideal event loop the driver runs itself: tests/integration/node_limiters.rs
// passes the constructor's options as JSON in the first argument and writes
// one request time a line (whole milliseconds) on stdin; for each request
// the driver prints "A RUN_MS" (the job ran then) or "R" (dropped).
//
// Timers are the driver's: a timer of d ms fires exactly d ms after it was
// set (0 at the same instant, where Node waits at least 1 ms), in the order
// they fall due, each followed by every promise it settles. Date.now() is the
// loop's time, from 2026-01-01T00:00:00Z (a request's time is counted from
// there): Bottleneck is constructed then, so its heartbeat beats at every
// multiple of heartbeatInterval after it. A request is scheduled after every
// timer due at or before its time, and its own work at that instant (the
// submit and register steps' yields) runs before the next request.
'use strict';
const fs = require('fs');

const realSetImmediate = setImmediate;
const EPOCH = 1767225600000;
let now = EPOCH;
Date.now = () => now;
let timers = [];
let sequence = 0;
function addTimer(callback, ms, args, repeat) {
  const delay = Math.max(0, Number(ms) || 0);
  const timer = { at: now + delay, id: sequence++, callback, args, repeat: repeat ? delay : null };
  timers.push(timer);
  return { timer, unref() { return this; }, ref() { return this; } };
}
function clear(handle) {
  if (handle && handle.timer) timers = timers.filter((t) => t !== handle.timer);
}
global.setTimeout = (callback, ms, ...args) => addTimer(callback, ms, args, false);
global.setInterval = (callback, ms, ...args) => addTimer(callback, ms, args, true);
global.clearTimeout = clear;
global.clearInterval = clear;

// Every promise settled so far runs its reactions before this resolves.
const settle = () => new Promise((resolve) => realSetImmediate(resolve));

// Runs every timer due at or before `until`, in order, settling after each.
async function runUntil(until) {
  await settle();
  for (;;) {
    let next = null;
    for (const t of timers) {
      if (t.at <= until && (next === null || t.at < next.at || (t.at === next.at && t.id < next.id))) next = t;
    }
    if (next === null) break;
    now = next.at;
    if (next.repeat === null) {
      timers = timers.filter((t) => t !== next);
    } else {
      next.at += Math.max(1, next.repeat);
      next.id = sequence++;
    }
    next.callback(...next.args);
    await settle();
  }
  now = Math.max(now, until);
}

const Bottleneck = require('bottleneck');

async function main() {
  const options = JSON.parse(process.argv[2]);
  const limiter = new Bottleneck(options);
  const times = fs.readFileSync(0, 'utf8').split('\n').filter((line) => line.length > 0).map((ms) => EPOCH + Number(ms));
  const answers = new Array(times.length).fill(null);
  let settled = 0;
  for (let i = 0; i < times.length; i++) {
    await runUntil(times[i]);
    limiter
      .schedule(() => {
        answers[i] = `A ${Date.now() - EPOCH}`;
        settled++;
        return Promise.resolve();
      })
      .catch((error) => {
        if (!(error instanceof Bottleneck.BottleneckError)) throw error;
        answers[i] = 'R';
        settled++;
      });
    await runUntil(times[i]);
  }
  // The queued jobs run at later heartbeats (or their minTime turn).
  const last = times.length > 0 ? times[times.length - 1] : EPOCH;
  while (settled < times.length) {
    const due = Math.min(...timers.map((t) => t.at));
    if (!Number.isFinite(due) || due > last + 1e9) throw new Error(`${times.length - settled} jobs never settle`);
    await runUntil(due);
  }
  process.stdout.write(answers.join('\n') + '\n');
  limiter.disconnect();
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
