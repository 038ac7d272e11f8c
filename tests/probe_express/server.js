// The Express server with express-rate-limit 7.5.0 that burstsim probe is
// tested against (tests/integration/probe_real.rs starts it on PORT, on
// loopback). Its limiter is the one in scenarios/probe-express.toml: each
// X-Api-Key may send 10 requests per 1 s window; a window opens at its
// key's first request (MemoryStore: resetTime = first hit + windowMs, read
// on Date.now()'s milliseconds), and every request counts, rejected ones too.
'use strict';
const express = require('express');
const { rateLimit } = require('express-rate-limit');

const app = express();
app.use(
  rateLimit({
    windowMs: 1000,
    limit: 10,
    standardHeaders: 'draft-7',
    legacyHeaders: false,
    keyGenerator: (req) => req.get('X-Api-Key') || 'anonymous',
    validate: false,
  }),
);
app.get('*', (req, res) => res.send('ok'));

const server = app.listen(Number(process.env.PORT), '127.0.0.1', () => {
  console.log(`listening on ${server.address().port}`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
