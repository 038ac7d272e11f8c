// A driver for burstsim's tests: Traefik's rateLimit decision around the
// real golang.org/x/time/rate and the real github.com/mailgun/ttlmap (the
// map Traefik keeps sources in), with injected times. Arguments: average,
// period in ns, burst, and where within a Unix second the run starts, in ns.
// Standard input: one request time per line, in ns from the start. Standard
// output: "A <delay ns>", or "R <Retry-After seconds>" as Traefik sends it, per request.
package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/mailgun/timetools"
	"github.com/mailgun/ttlmap"
	"golang.org/x/time/rate"
)

func main() {
	average, _ := strconv.ParseInt(os.Args[1], 10, 64)
	period, _ := strconv.ParseInt(os.Args[2], 10, 64)
	burst, _ := strconv.Atoi(os.Args[3])
	offset, _ := strconv.ParseInt(os.Args[4], 10, 64)
	// As Traefik's New: the rate, maxDelay and the TTL of a source's limiter.
	rtl := float64(average*int64(time.Second)) / float64(period)
	var maxDelay time.Duration
	if rtl < 1 {
		maxDelay = 500 * time.Millisecond
	} else {
		maxDelay = time.Second / (time.Duration(rtl) * 2)
	}
	ttl := 1
	if rtl >= 1 {
		ttl++
	} else {
		ttl += int(1 / rtl)
	}
	base := time.Unix(1700000000, offset)
	clock := &timetools.FreezedTime{CurrentTime: base}
	buckets, err := ttlmap.NewMap(1000, ttlmap.Clock(clock))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		ns, err := strconv.ParseInt(in.Text(), 10, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		now := base.Add(time.Duration(ns))
		clock.CurrentTime = now
		// As Traefik's ServeHTTP: the source's limiter, or a new one, set
		// again so that its expiry follows its last request.
		var limiter *rate.Limiter
		if found, ok := buckets.Get("source"); ok {
			limiter = found.(*rate.Limiter)
		} else {
			limiter = rate.NewLimiter(rate.Limit(rtl), burst)
		}
		if err := buckets.Set("source", limiter, ttl); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		res := limiter.ReserveN(now, 1)
		if !res.OK() {
			fmt.Fprintln(out, "R")
			continue
		}
		delay := res.DelayFrom(now)
		if delay > maxDelay {
			res.CancelAt(now)
			// Traefik's serveDelayError: Retry-After is the delay in
			// seconds, rounded up.
			fmt.Fprintf(out, "R %.0f\n", math.Ceil(delay.Seconds()))
			continue
		}
		fmt.Fprintf(out, "A %d\n", delay.Nanoseconds())
	}
}
