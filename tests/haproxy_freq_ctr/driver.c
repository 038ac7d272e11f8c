/*
 * burstsim's test driver around HAProxy's own frequency counter: built by
 * tests/integration/haproxy_freq_ctr.rs against the source of the installed HAProxy
 * (its include/ and src/freq_ctr.c, fetched by .ci/run), never committed
 * with it. It plays a stick-table entry's http_req_rate(P) with
 * `track-sc0` then `deny if { sc_http_req_rate(0) gt L }`: for each
 * millisecond read on stdin it sets HAProxy's clock to START + that
 * millisecond (u32, wrapping as HAProxy's does), counts the request with
 * update_freq_ctr_period and prints 1 when read_freq_ctr_period is at
 * most L, else 0.
 *
 * usage: driver PERIOD_MS LIMIT START_MS < milliseconds
 */
#include <stdio.h>
#include <stdlib.h>

#include <haproxy/api.h>
#include <haproxy/freq_ctr.h>

/* HAProxy defines this in src/clock.c; the driver owns the clock here. */
volatile uint global_now_ms;

int main(int argc, char **argv)
{
	struct freq_ctr entry = { 0 };
	unsigned long long ms;
	uint period, limit, start;

	if (argc != 4) {
		fprintf(stderr, "usage: driver PERIOD_MS LIMIT START_MS\n");
		return 2;
	}
	period = strtoul(argv[1], NULL, 10);
	limit = strtoul(argv[2], NULL, 10);
	start = strtoul(argv[3], NULL, 10);
	while (scanf("%llu", &ms) == 1) {
		global_now_ms = start + (uint)ms;
		update_freq_ctr_period(&entry, period, 1);
		putchar(read_freq_ctr_period(&entry, period) <= limit ? '1' : '0');
	}
	putchar('\n');
	return 0;
}
