# Writes the checkout access log's requests (scenarios/traces/checkout-access.log) in
# vendors' formats: the samples beside it. Run from the project root.
import re, json, datetime, hashlib
src = "scenarios/traces/checkout-access.log"
pat = re.compile(r'(\S+) \S+ \S+ \[([^\]]+)\] "(\S+) (\S+) (\S+)" (\d+) (\d+) "([^"]*)" "([^"]*)"')
rows = []
for n, line in enumerate(open(src)):
    m = pat.match(line)
    ip, t, method, path, proto, status, size, ref, agent = m.groups()
    when = datetime.datetime.strptime(t, "%d/%b/%Y:%H:%M:%S %z").astimezone(datetime.timezone.utc)
    rows.append((n, ip, when, method, path, proto, int(status), int(size), agent))
def rid(n): return hashlib.sha1(str(n).encode()).hexdigest()
with open("scenarios/traces/checkout-access.alb.log", "w") as f:
    for n, ip, w, m, p, pr, st, sz, ag in rows:
        iso = w.strftime("%Y-%m-%dT%H:%M:%S.000000Z")
        done = (w + datetime.timedelta(seconds=0)).strftime("%Y-%m-%dT%H:%M:%S.000000Z")
        target = "-" if st == 429 else "10.0.1.17:8080"
        tst = "-" if st == 429 else str(st)
        f.write(f'https {done} app/shop-alb/50dc6c495c0c9188 {ip}:{40000 + n % 20000} {target} 0.000 0.012 0.000 {st} {tst} 180 {sz} "{m} https://shop.example:443{p} {pr}" "{ag}" ECDHE-RSA-AES128-GCM-SHA256 TLSv1.2 arn:aws:elasticloadbalancing:eu-west-1:123456789012:targetgroup/shop/73e2d6bc24d8a067 "Root=1-{rid(n)[:8]}-{rid(n)[8:32]}" "shop.example" "-" 1 {iso} "forward" "-" "-" "{target}" "{tst}" "-" "-" TID_{rid(n)[:16]}\n')
with open("scenarios/traces/checkout-access.cloudfront.log", "w") as f:
    f.write("#Version: 1.0\n#Fields: date time x-edge-location sc-bytes c-ip cs-method cs(Host) cs-uri-stem sc-status cs(Referer) cs(User-Agent) cs-uri-query cs(Cookie) x-edge-result-type x-edge-request-id x-host-header cs-protocol cs-bytes time-taken x-forwarded-for ssl-protocol ssl-cipher x-edge-response-result-type cs-protocol-version fle-status fle-encrypted-fields c-port time-to-first-byte x-edge-detailed-result-type sc-content-type sc-content-len sc-range-start sc-range-end\n")
    for n, ip, w, m, p, pr, st, sz, ag in rows:
        res = "Error" if st == 429 else "Miss"
        fields = [w.strftime("%Y-%m-%d"), w.strftime("%H:%M:%S"), "FRA56-P1", str(sz), ip, m, "d111111abcdef8.cloudfront.net", p, str(st), "-", ag.replace(" ", "%20"), "-", "-", res, rid(n)[:20], "shop.example", "https", "180", "0.012", "-", "TLSv1.3", "TLS_AES_128_GCM_SHA256", res, "HTTP/1.1", "-", "-", str(40000 + n % 20000), "0.012", res, "application/json", str(sz), "-", "-"]
        f.write("\t".join(fields) + "\n")
with open("scenarios/traces/checkout-access.envoy.log", "w") as f:
    for n, ip, w, m, p, pr, st, sz, ag in rows:
        iso = w.strftime("%Y-%m-%dT%H:%M:%S.000Z")
        flags, up = ("RL", "-") if st == 429 else ("-", "12")
        host = "-" if st == 429 else "10.0.1.17:8080"
        f.write(f'[{iso}] "{m} {p} {pr}" {st} {flags} 180 {sz} 12 {up} "{ip}" "{ag}" "{rid(n)[:8]}-{rid(n)[8:12]}-{rid(n)[12:16]}-{rid(n)[16:20]}-{rid(n)[20:32]}" "shop.example" "{host}"\n')
with open("scenarios/traces/checkout-access.haproxy.log", "w") as f:
    for n, ip, w, m, p, pr, st, sz, ag in rows:
        date = w.strftime("%d/%b/%Y:%H:%M:%S.000")
        syslog = w.strftime("%b %e %H:%M:%S")
        if st == 429:
            srv, timers, tsc = "shop/<NOSRV>", "0/-1/-1/-1/0", "PR--"
        else:
            srv, timers, tsc = "shop/app1", "0/0/1/11/12", "----"
        f.write(f'{syslog} lb1 haproxy[2211]: {ip}:{40000 + n % 20000} [{date}] https-in~ {srv} {timers} {st} {sz} - - {tsc} 12/12/3/1/0 0/0 {{shop.example}} "{m} {p} {pr}"\n')
with open("scenarios/traces/checkout-access.gcp.json", "w") as f:
    for n, ip, w, m, p, pr, st, sz, ag in rows:
        entry = {
            "httpRequest": {"remoteIp": ip, "requestMethod": m, "requestUrl": f"https://shop.example{p}", "status": st, "userAgent": ag},
            "jsonPayload": {"statusDetails": "denied_by_security_policy" if st == 429 else "response_sent_by_backend"},
            "resource": {"type": "http_load_balancer"},
            "timestamp": w.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        f.write(json.dumps(entry, separators=(",", ":"), sort_keys=True) + "\n")
# Kong's file-log: kong.log.serialize() (kong/pdk/log.lua) one object a line,
# as OpenResty's cjson writes it (every "/" escaped); a request its
# rate-limiting plugin turned away was answered 429 by Kong, no upstream.
with open("scenarios/traces/checkout-access.kong.json", "w") as f:
    for n, ip, w, m, p, pr, st, sz, ag in rows:
        limited = st == 429
        entry = {
            "request": {
                "id": rid(n)[:32], "uri": p, "url": f"https://shop.example:443{p}", "querystring": {},
                "method": m, "size": 180,
                "headers": {"host": "shop.example", "user-agent": ag, "accept": "application/json"},
            },
            "upstream_uri": "" if limited else p,
            "upstream_status": "" if limited else str(st),
            "response": {
                "status": st, "size": sz,
                "headers": {"x-ratelimit-limit-second": "20", "x-ratelimit-remaining-second": "0" if limited else "7"},
            },
            "latencies": {"kong": 0, "proxy": -1 if limited else 11, "request": 1 if limited else 12, "receive": 0},
            "route": {"name": "checkout", "paths": ["/api/"]},
            "service": {"name": "shop", "host": "10.0.1.17", "port": 8080},
            "client_ip": ip,
            "started_at": int(w.timestamp()) * 1000,
            "source": "kong" if limited else "upstream",
        }
        f.write(json.dumps(entry, separators=(",", ":")).replace("/", "\\/") + "\n")
