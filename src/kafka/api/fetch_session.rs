//! Fetch sessions (KIP-227), as Kafka 4.3.1's `FetchManager`, `FetchSession` and
//! `FetchSessionCacheShard` keep them: a consumer's full Fetch (epoch 0) opens a session
//! that remembers its partitions, and its incremental Fetches (epoch 1, 2, ...) name only
//! the partitions that changed (or to forget), and are answered with only the partitions
//! that have records, a new high watermark or log start offset, or an error.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use parking_lot::Mutex;

/// Kafka's `max.incremental.fetch.session.cache.slots` default: the sessions kept at once.
pub(crate) const CACHE_SLOTS: usize = 1000;
/// Kafka's `KafkaBroker.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS`: a session unused for
/// longer may be evicted for a new one, and one younger is never evicted for a larger one.
const EVICTION_MS: i64 = 120_000;

/// `FetchMetadata`'s epochs: a full request that opens a session, one that asks for none.
pub(crate) const INITIAL_EPOCH: i32 = 0;
pub(crate) const FINAL_EPOCH: i32 = -1;
/// `FetchMetadata.INVALID_SESSION_ID`.
pub(crate) const INVALID_SESSION_ID: i32 = 0;

/// `FetchMetadata.nextEpoch`.
fn next_epoch(epoch: i32) -> i32 {
    match epoch {
        e if e < 0 => FINAL_EPOCH,
        i32::MAX => 1,
        e => e + 1,
    }
}

/// A partition of a Fetch, as asked.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Asked {
    pub(crate) topic: String,
    pub(crate) partition: i32,
    pub(crate) fetch_offset: i64,
    pub(crate) max_bytes: i32,
}

/// What one partition's answer says that a session compares with the last one sent.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Answered {
    pub(crate) has_records: bool,
    pub(crate) high_watermark: i64,
    pub(crate) log_start_offset: i64,
    pub(crate) error: bool,
}

/// Kafka's `CachedPartition`: the request's parameters and what was last answered.
#[derive(Clone, Debug)]
struct Cached {
    asked: Asked,
    high_watermark: i64,
    log_start_offset: i64,
}

impl Cached {
    /// `CachedPartition.maybeUpdateResponseData`: whether the answer must carry the
    /// partition, remembering what it says when `update`.
    fn must_respond(&mut self, answer: &Answered, update: bool) -> bool {
        let mut must = answer.has_records;
        if self.high_watermark != answer.high_watermark {
            must = true;
            if update {
                self.high_watermark = answer.high_watermark;
            }
        }
        if self.log_start_offset != answer.log_start_offset {
            must = true;
            if update {
                self.log_start_offset = answer.log_start_offset;
            }
        }
        if answer.error {
            // Sent again once the error is gone.
            if update {
                self.high_watermark = -1;
            }
            must = true;
        }
        must
    }
}

type Key = (String, i32);

/// A session's partitions in order (Kafka's `ImplicitLinkedHashCollection`): a partition
/// answered with records moves to the end, so that the next answers start elsewhere.
#[derive(Debug, Default)]
struct Partitions {
    by_key: HashMap<Key, (u64, Cached)>,
    order: BTreeMap<u64, Key>,
    next: u64,
}

impl Partitions {
    fn push(&mut self, cached: Cached) {
        let key = (cached.asked.topic.clone(), cached.asked.partition);
        let seq = self.next;
        self.next += 1;
        if let Some((old, _)) = self.by_key.insert(key.clone(), (seq, cached)) {
            self.order.remove(&old);
        }
        self.order.insert(seq, key);
    }

    fn remove(&mut self, key: &Key) {
        if let Some((seq, _)) = self.by_key.remove(key) {
            self.order.remove(&seq);
        }
    }

    fn move_to_end(&mut self, key: &Key) {
        if let Some((seq, cached)) = self.by_key.remove(key) {
            self.order.remove(&seq);
            self.push(cached);
        }
    }

    fn len(&self) -> usize {
        self.by_key.len()
    }

    fn asked(&self) -> Vec<Asked> {
        self.order
            .values()
            .map(|k| self.by_key[k].1.asked.clone())
            .collect()
    }
}

#[derive(Debug)]
pub(crate) struct Session {
    id: i32,
    /// The epoch the next incremental request must carry.
    epoch: i32,
    partitions: Partitions,
    created_ms: i64,
    last_used_ms: i64,
}

/// How a Fetch is answered, decided before it reads (Kafka's `FetchContext`).
pub(crate) enum Context {
    /// No session (epoch -1, or a version without sessions): the partitions asked.
    Sessionless(Vec<Asked>),
    /// A full request that may open a session: the partitions asked.
    Full(Vec<Asked>),
    /// An incremental request of a session: every partition the session holds.
    Incremental {
        session: Arc<Mutex<Session>>,
        /// The epoch the session moved to with this request.
        epoch: i32,
        partitions: Vec<Asked>,
    },
    /// `FETCH_SESSION_ID_NOT_FOUND` or `INVALID_FETCH_SESSION_EPOCH`: nothing is read.
    Error(i16),
}

impl Context {
    /// The partitions to read, in the order Kafka reads and answers them.
    pub(crate) fn partitions(&self) -> &[Asked] {
        match self {
            Context::Sessionless(p) | Context::Full(p) => p,
            Context::Incremental { partitions, .. } => partitions,
            Context::Error(_) => &[],
        }
    }
}

/// What a Fetch's answer becomes once read: its session id, a top-level error, and which
/// of the partitions read it carries.
pub(crate) struct Outcome {
    pub(crate) session_id: i32,
    pub(crate) error_code: i16,
    pub(crate) keep: Vec<bool>,
}

/// Kafka's `FETCH_SESSION_ID_NOT_FOUND` and `INVALID_FETCH_SESSION_EPOCH`.
const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
const INVALID_FETCH_SESSION_EPOCH: i16 = 71;

/// The sessions of every connection (a client may send its next Fetch on another one).
#[derive(Default)]
pub(crate) struct FetchSessions {
    sessions: Mutex<HashMap<i32, Arc<Mutex<Session>>>>,
}

/// Keeps the first entry of each (topic, partition), as Kafka's `LinkedHashMap` of the
/// request's partitions keeps its first place (with the last one's parameters).
fn dedup(asked: Vec<Asked>) -> Vec<Asked> {
    let mut at: HashMap<Key, usize> = HashMap::new();
    let mut out: Vec<Asked> = Vec::new();
    for a in asked {
        let key = (a.topic.clone(), a.partition);
        match at.get(&key) {
            Some(&i) => out[i] = a,
            None => {
                at.insert(key, out.len());
                out.push(a);
            }
        }
    }
    out
}

impl FetchSessions {
    /// Kafka's `FetchManager.newContext` for a request of `session_id` and `epoch` asking
    /// `asked` and forgetting `forgotten` (`epoch` -1 for versions without sessions).
    pub(crate) fn context(
        &self,
        session_id: i32,
        epoch: i32,
        asked: Vec<Asked>,
        forgotten: &[(String, i32)],
        now_ms: i64,
    ) -> Context {
        let asked = dedup(asked);
        if epoch == INITIAL_EPOCH || epoch == FINAL_EPOCH {
            // A full request closes the session it names.
            if session_id != INVALID_SESSION_ID {
                self.sessions.lock().remove(&session_id);
            }
            return if epoch == FINAL_EPOCH {
                Context::Sessionless(asked)
            } else {
                Context::Full(asked)
            };
        }
        let sessions = self.sessions.lock();
        let Some(session) = sessions.get(&session_id).cloned() else {
            return Context::Error(FETCH_SESSION_ID_NOT_FOUND);
        };
        drop(sessions);
        let mut s = session.lock();
        if s.epoch != epoch {
            return Context::Error(INVALID_FETCH_SESSION_EPOCH);
        }
        // `FetchSession.update`: new partitions join at the end, known ones take the
        // request's parameters in place, forgotten ones go.
        for a in asked {
            let key = (a.topic.clone(), a.partition);
            match s.partitions.by_key.get_mut(&key) {
                Some((_, cached)) => cached.asked = a,
                None => s.partitions.push(Cached {
                    asked: a,
                    high_watermark: -1,
                    log_start_offset: -1,
                }),
            }
        }
        for key in forgotten {
            s.partitions.remove(key);
        }
        s.last_used_ms = now_ms;
        s.epoch = next_epoch(s.epoch);
        let partitions = s.partitions.asked();
        let epoch = s.epoch;
        drop(s);
        Context::Incremental {
            session,
            epoch,
            partitions,
        }
    }

    /// The answer's session and the partitions it carries, given what was read of
    /// `context.partitions()` (`answered`, in the answer's order): a full request opens a
    /// session of them, in that order, when the cache has room
    /// (`FetchSessionCacheShard.maybeCreateSession`); an incremental one carries only the
    /// partitions that changed, and those with records move to the session's end
    /// (`IncrementalFetchContext`). `keep` follows `answered`.
    pub(crate) fn outcome(
        &self,
        context: &Context,
        answered: &[(&Asked, Answered)],
        now_ms: i64,
    ) -> Outcome {
        let all = vec![true; answered.len()];
        match context {
            Context::Sessionless(_) => Outcome {
                session_id: INVALID_SESSION_ID,
                error_code: 0,
                keep: all,
            },
            Context::Error(code) => Outcome {
                session_id: INVALID_SESSION_ID,
                error_code: *code,
                keep: Vec::new(),
            },
            Context::Full(_) => {
                let mut partitions = Partitions::default();
                for (a, r) in answered {
                    partitions.push(Cached {
                        asked: (*a).clone(),
                        high_watermark: r.high_watermark,
                        log_start_offset: r.log_start_offset,
                    });
                }
                Outcome {
                    session_id: self.create(partitions, now_ms),
                    error_code: 0,
                    keep: all,
                }
            }
            Context::Incremental { session, epoch, .. } => {
                let mut s = session.lock();
                if s.epoch != *epoch {
                    // Another request of the session came meanwhile.
                    return Outcome {
                        session_id: s.id,
                        error_code: INVALID_FETCH_SESSION_EPOCH,
                        keep: vec![false; answered.len()],
                    };
                }
                let mut keep = Vec::with_capacity(answered.len());
                for (a, r) in answered {
                    let key = (a.topic.clone(), a.partition);
                    let must = s
                        .partitions
                        .by_key
                        .get_mut(&key)
                        .is_some_and(|(_, cached)| cached.must_respond(r, true));
                    if must && r.has_records {
                        s.partitions.move_to_end(&key);
                    }
                    keep.push(must);
                }
                Outcome {
                    session_id: s.id,
                    error_code: 0,
                    keep,
                }
            }
        }
    }

    /// A new session of `partitions`, or `INVALID_SESSION_ID` when the cache is full and
    /// none may be evicted for it.
    fn create(&self, partitions: Partitions, now_ms: i64) -> i32 {
        let mut sessions = self.sessions.lock();
        if sessions.len() >= CACHE_SLOTS && !evict(&mut sessions, partitions.len(), now_ms) {
            return INVALID_SESSION_ID;
        }
        // Ids need only be distinct: without random bits, the first free one.
        let mut attempt = 0u32;
        let id = loop {
            attempt += 1;
            let id = (rand_u32().unwrap_or(attempt) & 0x7fff_ffff) as i32;
            if id != INVALID_SESSION_ID && !sessions.contains_key(&id) {
                break id;
            }
        };
        sessions.insert(
            id,
            Arc::new(Mutex::new(Session {
                id,
                epoch: next_epoch(INITIAL_EPOCH),
                partitions,
                created_ms: now_ms,
                last_used_ms: now_ms,
            })),
        );
        id
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.sessions.lock().len()
    }
}

/// `FetchSessionCacheShard.tryEvict` for a consumer's session of `size` partitions: the
/// least recently used session if unused for `EVICTION_MS`, else the smallest of those
/// older than that if it is smaller than the new one.
fn evict(sessions: &mut HashMap<i32, Arc<Mutex<Session>>>, size: usize, now_ms: i64) -> bool {
    let stale = sessions
        .iter()
        .map(|(&id, s)| (s.lock().last_used_ms, id))
        .min();
    if let Some((last_used, id)) = stale {
        if now_ms - last_used > EVICTION_MS {
            sessions.remove(&id);
            return true;
        }
    }
    let evictable = sessions
        .iter()
        .filter_map(|(&id, s)| {
            let s = s.lock();
            (now_ms - s.created_ms > EVICTION_MS).then_some((s.partitions.len(), id))
        })
        .min();
    match evictable {
        Some((smaller, id)) if smaller < size => {
            sessions.remove(&id);
            true
        }
        _ => false,
    }
}

/// A random session id's bits (Kafka draws them with `ThreadLocalRandom`), `None` when
/// the system has none to give.
fn rand_u32() -> Option<u32> {
    let b = crate::engine::metadata_files::Uuid::random()
        .ok()?
        .to_bytes();
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(topic: &str, partition: i32, offset: i64) -> Asked {
        Asked {
            topic: topic.into(),
            partition,
            fetch_offset: offset,
            max_bytes: 1 << 20,
        }
    }

    /// The context's partitions with their answers, in its order.
    fn zip<'a>(context: &'a Context, answers: &[Answered]) -> Vec<(&'a Asked, Answered)> {
        context
            .partitions()
            .iter()
            .zip(answers.iter().copied())
            .collect()
    }

    fn answered(records: bool, hw: i64) -> Answered {
        Answered {
            has_records: records,
            high_watermark: hw,
            log_start_offset: 0,
            error: false,
        }
    }

    #[test]
    fn a_full_fetch_opens_a_session_whose_incremental_fetches_carry_only_changes() {
        let cache = FetchSessions::default();
        let full = cache.context(0, 0, vec![asked("t", 0, 0), asked("t", 1, 0)], &[], 0);
        let out = cache.outcome(
            &full,
            &zip(&full, &[answered(true, 5), answered(false, 0)]),
            0,
        );
        assert_eq!((out.error_code, out.keep), (0, vec![true, true]));
        let id = out.session_id;
        assert_ne!(id, 0);
        // Epoch 1: partition 0's new offset; partition 1 comes from the session.
        let inc = cache.context(id, 1, vec![asked("t", 0, 5)], &[], 1);
        assert_eq!(inc.partitions(), &[asked("t", 0, 5), asked("t", 1, 0)]);
        let out = cache.outcome(
            &inc,
            &zip(&inc, &[answered(false, 5), answered(true, 3)]),
            1,
        );
        assert_eq!((out.session_id, out.keep), (id, vec![false, true]));
        // Partition 1 answered records: it moved to the end (after 0, where it was).
        let inc = cache.context(id, 2, vec![], &[], 2);
        assert_eq!(inc.partitions(), &[asked("t", 0, 5), asked("t", 1, 0)]);
        let out = cache.outcome(
            &inc,
            &zip(&inc, &[answered(true, 6), answered(false, 3)]),
            2,
        );
        assert_eq!(out.keep, vec![true, false]);
        let again = cache.context(id, 3, vec![], &[], 2);
        assert_eq!(again.partitions(), &[asked("t", 1, 0), asked("t", 0, 5)]);
        // The same epoch again, an unknown session: refused, nothing read.
        assert!(matches!(
            cache.context(id, 3, vec![], &[], 3),
            Context::Error(INVALID_FETCH_SESSION_EPOCH)
        ));
        assert!(matches!(
            cache.context(id ^ 1, 1, vec![], &[], 3),
            Context::Error(FETCH_SESSION_ID_NOT_FOUND)
        ));
        // Forgetting a partition; then a full request closes the session.
        let inc = cache.context(id, 4, vec![], &[("t".into(), 0)], 4);
        assert_eq!(inc.partitions(), &[asked("t", 1, 0)]);
        assert!(matches!(
            cache.context(id, -1, vec![], &[], 5),
            Context::Sessionless(_)
        ));
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn errors_are_always_answered_and_again_once_gone() {
        let mut cached = Cached {
            asked: asked("t", 0, 0),
            high_watermark: 5,
            log_start_offset: 0,
        };
        let error = Answered {
            error: true,
            ..answered(false, 5)
        };
        assert!(cached.must_respond(&error, true));
        assert!(cached.must_respond(&answered(false, 5), true));
        assert!(!cached.must_respond(&answered(false, 5), true));
    }

    #[test]
    fn a_full_cache_evicts_only_stale_or_older_smaller_sessions() {
        let cache = FetchSessions::default();
        let one = || vec![asked("t", 0, 0)];
        for _ in 0..CACHE_SLOTS {
            let c = cache.context(0, 0, one(), &[], 0);
            assert_ne!(
                cache
                    .outcome(&c, &zip(&c, &[answered(false, 0)]), 0)
                    .session_id,
                0
            );
        }
        // Young sessions: a new one of the same size finds no room.
        let c = cache.context(0, 0, one(), &[], 1000);
        assert_eq!(
            cache
                .outcome(&c, &zip(&c, &[answered(false, 0)]), 1000)
                .session_id,
            0
        );
        // Past the eviction time the least recently used goes.
        let c = cache.context(0, 0, one(), &[], EVICTION_MS + 1);
        assert_ne!(
            cache
                .outcome(&c, &zip(&c, &[answered(false, 0)]), EVICTION_MS + 1)
                .session_id,
            0
        );
        assert_eq!(cache.len(), CACHE_SLOTS);
    }
}
