// rate-limiter-flexible's own RateLimiterMemory (the version
// package-lock.json pins), driven on the test's clock:
// tests/integration/node_limiters.rs passes points, duration,
// blockDuration, execEvenly and execEvenlyMinDelayMs ("-" for its default)
// as arguments, writes "KEY NANOSECONDS" lines on stdin and reads, for each
// consume, "A DELAY_MS" (resolved, after that delay) or "R MS_BEFORE_NEXT"
// (rejected). Date.now() is the line's time in whole milliseconds. Timers
// never run on their own: execEvenly's delayed resolve is taken at once with
// its delay recorded, and the store's expiry timers are dropped (a record's
// expiry is checked on every consume anyway).
//
// With two more arguments, insurance points and duration, the limiter is a
// RateLimiterRedis whose store client fails every call, with a
// RateLimiterMemory of those as its insuranceLimiter: every consume is the
// insurance's, as when the store is down.
'use strict';
const fs = require('fs');

let now = 0;
Date.now = () => now;
let delayed = null;
global.setTimeout = (callback, ms, ...args) => {
  if (args.length > 0) {
    // execEvenly: setTimeout(resolve, delay, res).
    delayed = ms;
    callback(...args);
  }
  return { unref() {} };
};
global.clearTimeout = () => {};

const { RateLimiterMemory, RateLimiterRedis } = require('rate-limiter-flexible');

const [points, duration, blockDuration, execEvenly, minDelay, insurancePoints, insuranceDuration] =
  process.argv.slice(2);
const options = {
  points: Number(points),
  duration: Number(duration),
  blockDuration: Number(blockDuration),
  execEvenly: execEvenly === 'true',
  ...(minDelay === '-' ? {} : { execEvenlyMinDelayMs: Number(minDelay) }),
};
// A store that is down: every command fails.
const down = {
  rlflxIncr: () => Promise.reject(new Error('store down')),
  multi: () => {
    throw new Error('store down');
  },
};
const limiter =
  insurancePoints === undefined
    ? new RateLimiterMemory(options)
    : new RateLimiterRedis({
        ...options,
        storeClient: down,
        insuranceLimiter: new RateLimiterMemory({
          points: Number(insurancePoints),
          duration: Number(insuranceDuration),
        }),
      });

async function main() {
  const lines = fs.readFileSync(0, 'utf8').split('\n').filter((line) => line.length > 0);
  const out = [];
  for (const line of lines) {
    const [key, nanos] = line.split(' ');
    now = Number(BigInt(nanos) / 1000000n);
    delayed = null;
    try {
      await limiter.consume(key);
      out.push(`A ${delayed === null ? 0 : delayed}`);
    } catch (res) {
      if (!(res && typeof res.msBeforeNext === 'number')) throw res;
      out.push(`R ${res.msBeforeNext}`);
    }
  }
  process.stdout.write(out.join('\n') + '\n');
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
