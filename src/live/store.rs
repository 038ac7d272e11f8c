//! Talking to Redis: the server-side scripts (an atomic fixed window, a
//! sorted-set log), keys unique to a run, passwords kept out of messages,
//! connections with deadlines, and sending each request as it falls due.

use super::*;

/// INCR, and PEXPIRE on the first hit, in one atomic script.
pub(super) const FIXED_WINDOW: &str = "local c = redis.call('INCR', KEYS[1]) if c == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end return c";
/// A sorted set of admitted times: drop those older than the window, count,
/// add — and keep the key no longer than a window past its last use (ARGV[5]
/// ms of real time), so a run cut short leaves nothing behind for good.
pub(super) const SLIDING_LOG: &str = "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]) - tonumber(ARGV[2])) \
    local admit = 0 \
    if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4]) admit = 1 end \
    if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end return admit";

/// The Redis key of one limiter's replay: unique to this run, so two runs
/// against one Redis (in two containers, each its own PID 1) never count
/// each other's requests nor delete each other's key.
pub(super) fn run_key(limiter: &str, variant: Variant) -> String {
    format!(
        "burstsim:{}:{limiter}:{variant:?}",
        crate::random::unique_id()
    )
}

/// `url` with its password shown as `****`: errors go to CI logs, and the
/// URL often comes from a secret.
pub fn masked(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_string();
    };
    let user = rest[..at].split_once(':').map_or("", |(user, _)| user);
    format!("{scheme}://{user}:****{}", &rest[at..])
}

/// An error's text without the password of `url`, wherever a library
/// quoted it.
pub(super) fn without_password(text: String, url: &str) -> String {
    let password = url
        .split_once("://")
        .and_then(|(_, rest)| rest.split(['/', '?', '#']).next())
        .and_then(|authority| authority.rsplit_once('@'))
        .and_then(|(userinfo, _)| userinfo.split_once(':').map(|(_, p)| p).or(Some(userinfo)))
        .filter(|password| !password.is_empty());
    match password {
        Some(password) => text.replace(password, "****"),
        None => text,
    }
}

/// A connection whose connect, commands and replies all time out.
pub(super) fn connect(client: &redis::Client, redis: &Connection) -> Result<redis::Connection> {
    let fail = |err: redis::RedisError| {
        let why = if err.is_timeout() {
            "no answer".to_string()
        } else {
            without_password(err.to_string(), redis.url)
        };
        anyhow::anyhow!(
            "cannot connect to Redis at {} within {:?}: {why}",
            masked(redis.url),
            redis.timeout
        )
    };
    let con = client
        .get_connection_with_timeout(redis.timeout)
        .map_err(fail)?;
    con.set_read_timeout(Some(redis.timeout)).map_err(fail)?;
    con.set_write_timeout(Some(redis.timeout)).map_err(fail)?;
    Ok(con)
}

/// One request's command to Redis.
pub(super) struct Ask<'a> {
    key: &'a str,
    variant: Variant,
    window: u64,
    threshold: u64,
    window_ms: u64,
    /// When it was sent, scenario time.
    sent: u64,
    /// Its number in the workload (a unique sorted-set member).
    index: usize,
}

impl Ask<'_> {
    /// Redis's answer: admitted, and for the atomic fixed window the count.
    fn ask(
        &self,
        con: &mut redis::Connection,
        (fixed, log): &(redis::Script, redis::Script),
    ) -> Result<(bool, u64)> {
        let (key, threshold, window_ms) = (self.key, self.threshold, self.window_ms);
        Ok(match self.variant {
            Variant::AtomicFixedWindow => {
                let count = fixed.key(key).arg(window_ms).invoke::<i64>(con)? as u64;
                (count <= threshold, count)
            }
            Variant::NaiveFixedWindow => {
                let count: Option<u64> = redis::cmd("GET").arg(key).query(con)?;
                let count = count.unwrap_or(0);
                if count < threshold {
                    // The INCR and its expiry (set only on a key without one,
                    // as "on the first hit" does) in one transaction: the
                    // GET-then-INCR race stays, and no kill between the two
                    // leaves a key that never expires.
                    let _: (u64, i64) = redis::pipe()
                        .atomic()
                        .cmd("INCR")
                        .arg(key)
                        .cmd("PEXPIRE")
                        .arg(key)
                        .arg(window_ms)
                        .arg("NX")
                        .query(con)?;
                }
                (count < threshold, 0)
            }
            Variant::SlidingLog => {
                let admitted = log
                    .key(key)
                    .arg(self.sent)
                    .arg(self.window)
                    .arg(threshold)
                    .arg(self.index)
                    .arg(window_ms.saturating_mul(2))
                    .invoke::<i64>(con)?
                    == 1;
                (admitted, 0)
            }
        })
    }
}

/// Sends every arrival at its (sped-up) time from `redis.clients` threads;
/// the first error stops every client, unless `redis.through_outages`.
pub(super) fn send(
    client: &redis::Client,
    redis: &Connection,
    key: &str,
    variant: Variant,
    arrivals: &[u64],
    (window, threshold): (u64, u64),
    progress: &(dyn Fn() + Sync),
) -> Result<Vec<Sent>> {
    let (speed, clients) = (redis.speed, redis.clients);
    let results = Mutex::new(Vec::with_capacity(arrivals.len()));
    let stop = AtomicBool::new(false);
    let begun = Instant::now();
    let start = begun + Duration::from_millis(50);
    // Redis expires keys in real time, which runs `speed` times faster than the scenario's.
    let window_ms = ((window as f64 / speed / 1e6).round() as u64).max(1);
    std::thread::scope(|scope| -> Result<()> {
        let workers: Vec<_> = (0..clients)
            .map(|c| {
                let (results, stop) = (&results, &stop);
                scope.spawn(move || -> Result<()> {
                    let run = || -> Result<()> {
                        // None after a failure, until the next request reconnects.
                        let mut con = Some(connect(client, redis)?);
                        let scripts = (
                            redis::Script::new(FIXED_WINDOW),
                            redis::Script::new(SLIDING_LOG),
                        );
                        for (i, &due) in arrivals.iter().enumerate().skip(c).step_by(clients) {
                            let at = start + Duration::from_nanos((due as f64 / speed) as u64);
                            // Sleep in slices, so another client's failure stops this one.
                            let stopped = || -> Result<bool> {
                                crate::interrupt::check()?;
                                if Instant::now() >= redis.deadline {
                                    return Err(OutOfTime(
                                        redis.deadline.saturating_duration_since(begun),
                                    )
                                    .into());
                                }
                                Ok(stop.load(Ordering::Relaxed))
                            };
                            while let Some(wait) = at.checked_duration_since(Instant::now()) {
                                if stopped()? {
                                    return Ok(());
                                }
                                std::thread::sleep(wait.min(Duration::from_millis(50)));
                            }
                            if stopped()? {
                                return Ok(());
                            }
                            let now = || {
                                (Instant::now().saturating_duration_since(start).as_nanos() as f64
                                    * speed) as u64
                            };
                            let sent = now();
                            let asked = Ask {
                                key,
                                variant,
                                window,
                                threshold,
                                window_ms,
                                sent,
                                index: i,
                            };
                            let reply = match con.as_mut() {
                                Some(con) => asked.ask(con, &scripts),
                                None => connect(client, redis).and_then(|mut fresh| {
                                    let reply = asked.ask(&mut fresh, &scripts);
                                    con = Some(fresh);
                                    reply
                                }),
                            };
                            let (admitted, count) = match reply {
                                Ok((admitted, count)) => (Some(admitted), count),
                                Err(_) if redis.through_outages => {
                                    // A connection that timed out may be out of step: start afresh.
                                    con = None;
                                    (None, 0)
                                }
                                Err(err) => return Err(err),
                            };
                            let replied = now();
                            progress();
                            results
                                .lock()
                                .expect("no client panics holding the lock")
                                .push(Sent {
                                    due,
                                    at: sent,
                                    admitted,
                                    count,
                                    rtt: replied.saturating_sub(sent),
                                    client: c,
                                });
                        }
                        Ok(())
                    };
                    let timed_out = |err: &anyhow::Error| {
                        err.chain().any(|cause| {
                            cause
                                .downcast_ref::<redis::RedisError>()
                                .is_some_and(redis::RedisError::is_timeout)
                        })
                    };
                    let outcome = run().map_err(|err| {
                        if timed_out(&err) {
                            anyhow::anyhow!("no reply from Redis within {:?}", redis.timeout)
                        } else {
                            err
                        }
                    });
                    if outcome.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    outcome
                })
            })
            .collect();
        // Every client is joined; the first error is the one reported.
        let mut first = Ok(());
        for worker in workers {
            let outcome = worker.join().expect("a client thread ran to its end");
            if first.is_ok() {
                first = outcome;
            }
        }
        first.map_err(|err| {
            if crate::interrupt::caused(&err) || err.is::<OutOfTime>() {
                return err;
            }
            anyhow::anyhow!(
                "a client's request to Redis at {} failed; every client stopped: {}",
                masked(redis.url),
                without_password(format!("{err:#}"), redis.url)
            )
        })
    })?;
    let mut sent = results.into_inner().expect("every client finished");
    sent.sort_by_key(|s| s.at);
    Ok(sent)
}
