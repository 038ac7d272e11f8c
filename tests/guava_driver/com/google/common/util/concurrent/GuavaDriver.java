// Guava's own SmoothBursty RateLimiter (the jar Debian's libguava-java
// ships), or its SmoothWarmingUp when a third argument gives the warm-up
// period in microseconds (cold factor 3, as RateLimiter.create(N, warmup)
// builds it), driven on the test's clock: tests/integration/guava_real.rs feeds
// request times in nanoseconds on stdin, one a line, and reads "A" (passed)
// or "R" (refused) for each `tryAcquire()`. The class sits in Guava's
// package only to reach its package-private stopwatch and constructor, the
// way Guava's own tests drive it.
package com.google.common.util.concurrent;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;

public final class GuavaDriver {
  private static long nanos;

  public static void main(String[] args) throws Exception {
    double permitsPerSecond = Double.parseDouble(args[0]);
    double maxBurstSeconds = Double.parseDouble(args[1]);
    RateLimiter.SleepingStopwatch clock =
        new RateLimiter.SleepingStopwatch() {
          @Override
          protected long readMicros() {
            // Stopwatch.elapsed(MICROSECONDS): the nanoseconds truncated.
            return nanos / 1000;
          }

          @Override
          protected void sleepMicrosUninterruptibly(long micros) {
            // tryAcquire() without a timeout passes only when nothing is owed.
            if (micros != 0) {
              throw new IllegalStateException("tryAcquire() slept " + micros + " us");
            }
          }
        };
    RateLimiter limiter =
        args.length > 2
            ? new SmoothRateLimiter.SmoothWarmingUp(
                clock, Long.parseLong(args[2]), java.util.concurrent.TimeUnit.MICROSECONDS, 3.0)
            : new SmoothRateLimiter.SmoothBursty(clock, maxBurstSeconds);
    limiter.setRate(permitsPerSecond);
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
    BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out));
    String line;
    while ((line = in.readLine()) != null) {
      nanos = Long.parseLong(line.trim());
      out.write(limiter.tryAcquire() ? "A\n" : "R\n");
    }
    out.flush();
  }
}
