//! One request as the simulator moves it: when it arrives, whose it is and
//! which Host it names, and the compact forms chunks hold.

use crate::time::Nanos;

/// Whose request it is — an API key, a user, an address — and which Host
/// it names. Synthetic sources send everything as [`Key::DEFAULT`] or as
/// numbered clients; a trace may name a key column and a host column, whose
/// text is hashed (FNV-1a). Every request without a host names the one site
/// (host 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    /// The client: a synthetic client's number, or a trace's key hashed.
    pub client: u64,
    /// The Host it names: a trace's host field hashed, else 0.
    pub host: u64,
}

impl Key {
    /// The one key of traffic that names none.
    pub const DEFAULT: Key = Key { client: 0, host: 0 };

    /// Client number `client`, of the one site.
    pub const fn client(client: u64) -> Key {
        Key { client, host: 0 }
    }

    /// The key a trace's key field `text` names.
    pub fn named(text: &[u8]) -> Key {
        Key::client(crate::random::fnv1a(text))
    }

    /// The same client, naming the Host whose text is `host`.
    pub fn on_host(self, host: &[u8]) -> Key {
        self.on_host_of(Key::named(host))
    }

    /// The same client, naming the Host a field read as a key names.
    pub fn on_host_of(self, host: Key) -> Key {
        Key {
            host: host.client,
            ..self
        }
    }
}

/// One request: when it arrives, and whose it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// When it arrives.
    pub time: Nanos,
    /// Whose it is.
    pub key: Key,
}

impl Arrival {
    /// A request at `time` of the default key.
    #[inline]
    pub fn at(time: Nanos) -> Arrival {
        Arrival {
            time,
            key: Key::DEFAULT,
        }
    }
}

/// What the simulator's chunks hold: whole arrivals; a time and a client
/// when no request names a Host ([`Client`], two thirds of the bytes); or
/// bare times when every arrival has the default key (a third), to write
/// and to move from the thread that generates them to the one that decides.
pub trait Timed: Copy + Send + 'static {
    /// A default-key arrival at `time`.
    fn at(time: Nanos) -> Self;
    /// The arrival it stands for.
    fn arrival(self) -> Arrival;
    /// `arrival` as this holds it: only what the chunk type keeps (a
    /// workload chooses the type that keeps all its requests say).
    fn of(arrival: Arrival) -> Self;
    /// The same request, of `key`.
    fn with_key(self, key: Key) -> Self;
}

impl Timed for Arrival {
    #[inline]
    fn at(time: Nanos) -> Arrival {
        Arrival::at(time)
    }

    #[inline]
    fn arrival(self) -> Arrival {
        self
    }

    #[inline]
    fn of(arrival: Arrival) -> Arrival {
        arrival
    }

    #[inline]
    fn with_key(self, key: Key) -> Arrival {
        Arrival { key, ..self }
    }
}

/// A request of the one site: when it arrives and whose it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Client {
    time: Nanos,
    client: u64,
}

impl Timed for Client {
    #[inline]
    fn at(time: Nanos) -> Client {
        Client { time, client: 0 }
    }

    #[inline]
    fn arrival(self) -> Arrival {
        Arrival {
            time: self.time,
            key: Key::client(self.client),
        }
    }

    #[inline]
    fn of(arrival: Arrival) -> Client {
        debug_assert_eq!(arrival.key.host, 0, "a workload naming Hosts keeps them");
        Client {
            time: arrival.time,
            client: arrival.key.client,
        }
    }

    #[inline]
    fn with_key(self, key: Key) -> Client {
        debug_assert_eq!(key.host, 0, "a workload naming Hosts keeps them");
        Client {
            client: key.client,
            ..self
        }
    }
}

impl Timed for Nanos {
    #[inline]
    fn at(time: Nanos) -> Nanos {
        time
    }

    #[inline]
    fn arrival(self) -> Arrival {
        Arrival::at(self)
    }

    #[inline]
    fn of(arrival: Arrival) -> Nanos {
        debug_assert_eq!(
            arrival.key,
            Key::DEFAULT,
            "bare times are the default key's"
        );
        arrival.time
    }

    #[inline]
    fn with_key(self, key: Key) -> Nanos {
        debug_assert_eq!(key, Key::DEFAULT, "bare times are the default key's");
        self
    }
}

/// The clients of a workload's requests whose key names nothing, as its
/// replays name them (numbered or hashed): the key field `absent` (a text
/// log's `-`, as nginx logs a missing header) or `blank` (present, empty).
/// Gateways differ on them ([`crate::limiter::Limiter::treat_empty_keys`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EmptyKeys {
    /// Of a key field whose value was absent.
    pub absent: Vec<u64>,
    /// Of a key field present and empty.
    pub blank: Vec<u64>,
}

/// No keys that name nothing: what a source without a key field has.
pub static NO_EMPTY_KEYS: EmptyKeys = EmptyKeys {
    absent: Vec::new(),
    blank: Vec::new(),
};

impl EmptyKeys {
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.absent.is_empty() && self.blank.is_empty()
    }

    /// Both kinds, each client once, `other`'s added.
    pub fn add(&mut self, other: &EmptyKeys) {
        for (mine, theirs) in [
            (&mut self.absent, &other.absent),
            (&mut self.blank, &other.blank),
        ] {
            for &client in theirs {
                if !mine.contains(&client) {
                    mine.push(client);
                }
            }
        }
    }
}
