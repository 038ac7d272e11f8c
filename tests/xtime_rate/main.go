// A driver for burstsim's tests: Traefik's rateLimit decision around the
// real golang.org/x/time/rate, with injected times. Arguments: average,
// period in ns, burst. Standard input: one request time per line, in ns
// from the start. Standard output: "A <delay ns>" or "R" per request.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/time/rate"
)

func main() {
	average, _ := strconv.ParseInt(os.Args[1], 10, 64)
	period, _ := strconv.ParseInt(os.Args[2], 10, 64)
	burst, _ := strconv.Atoi(os.Args[3])
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
	base := time.Unix(1700000000, 0)
	var limiter *rate.Limiter
	var expires time.Time
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
		// The TTL map: a source idle for ttl seconds is forgotten.
		if limiter == nil || !now.Before(expires) {
			limiter = rate.NewLimiter(rate.Limit(rtl), burst)
		}
		expires = now.Add(time.Duration(ttl) * time.Second)
		res := limiter.ReserveN(now, 1)
		if !res.OK() {
			fmt.Fprintln(out, "R")
			continue
		}
		delay := res.DelayFrom(now)
		if delay > maxDelay {
			res.CancelAt(now)
			fmt.Fprintln(out, "R")
			continue
		}
		fmt.Fprintf(out, "A %d\n", delay.Nanoseconds())
	}
}
