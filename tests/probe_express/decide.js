// express-rate-limit's own middleware and MemoryStore (the version
// package-lock.json pins), driven on the test's clock:
// tests/integration/express_real.rs writes "KEY NANOSECONDS" lines on stdin
// and reads, for each, "A" (next() called) or "R SECONDS" (429 and its
// Retry-After). Date.now() is the line's time in whole milliseconds. Every
// line is read before the first is decided and each decision awaits only
// promises that are already settled, so the store's clean-up timer (real
// time, every windowMs) never runs between two of them.
//
// With three more arguments, FROM_MS TO_MS PASS, the store fails every
// increment while Date.now() is in [FROM_MS, TO_MS), and passOnStoreError is
// PASS ("true" or "false"); a request whose error reaches Express's error
// handler (a 500) reads "E".
'use strict';
const fs = require('fs');
const { rateLimit, MemoryStore } = require('express-rate-limit');

const [windowMs, limit, from, to] = process.argv.slice(2, 6).map(Number);
const passOnStoreError = process.argv[6] === 'true';
let now = 0;
Date.now = () => now;
// passOnStoreError logs every error it passes over.
console.error = () => {};

// The MemoryStore, down over [from, to).
class Flaky extends MemoryStore {
  async increment(key) {
    if (now >= from && now < to) {
      throw new Error('store down');
    }
    return super.increment(key);
  }
}

const limiter = rateLimit({
  windowMs,
  limit,
  ...(Number.isNaN(from) ? {} : { store: new Flaky(), passOnStoreError }),
  standardHeaders: 'draft-7',
  legacyHeaders: false,
  keyGenerator: (request) => request.key,
  validate: false,
});

function response() {
  return {
    statusCode: 200,
    headersSent: false,
    writableEnded: false,
    headers: {},
    setHeader(name, value) {
      this.headers[name.toLowerCase()] = value;
    },
    append(name, value) {
      this.headers[name.toLowerCase()] = value;
    },
    status(code) {
      this.statusCode = code;
      return this;
    },
    send() {
      this.writableEnded = true;
    },
    on() {},
  };
}

async function main() {
  const lines = fs.readFileSync(0, 'utf8').split('\n').filter((line) => line.length > 0);
  const out = [];
  for (const line of lines) {
    const [key, nanos] = line.split(' ');
    now = Number(BigInt(nanos) / 1000000n);
    const res = response();
    let passed = false;
    let failed = false;
    await limiter({ key, ip: '127.0.0.1', headers: {}, app: { get: () => false } }, res, (error) => {
      failed = error !== undefined;
      passed = !failed;
    });
    out.push(failed ? 'E' : passed ? 'A' : `R ${res.headers['retry-after']}`);
  }
  process.stdout.write(out.join('\n') + '\n');
}

main().catch((error) => {
  process.stderr.write(`${error.stack}\n`);
  process.exit(1);
});
