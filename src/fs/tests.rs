//! `KpfsFs` driven directly, without a kernel: the line assembly of `log` writes, the
//! all-or-nothing rule for refused writes, and the refusals that must leave a reason.

use std::ffi::OsStr;
use std::sync::Arc;

use crate::engine::{BrokerConfig, Engine, EngineOptions, SystemClock};
use crate::fs::inode::ROOT_INO;
use crate::fs::{KpfsFs, SetAttr};

struct Fixture {
    fs: KpfsFs,
    _dir: tempfile::TempDir,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let broker = BrokerConfig::load(None, &[]).unwrap();
    let engine = Engine::open(
        dir.path(),
        broker,
        Arc::new(SystemClock),
        EngineOptions::default(),
    )
    .unwrap();
    let fs = KpfsFs::new(Arc::new(engine), dir.path());
    Fixture { fs, _dir: dir }
}

impl Fixture {
    fn ino(&self, parent: u64, name: &str) -> u64 {
        self.fs.lookup(parent, OsStr::new(name)).unwrap().attr.ino
    }

    fn topic(&self, name: &str) -> u64 {
        self.fs.mkdir(ROOT_INO, OsStr::new(name)).unwrap().attr.ino
    }

    fn read_all(&self, ino: u64) -> String {
        let fh = self.fs.open(ino, libc::O_RDONLY).unwrap().fh;
        let mut out = Vec::new();
        loop {
            let chunk = self.fs.read(fh, out.len() as u64, 4096).unwrap();
            if chunk.is_empty() {
                break;
            }
            out.extend_from_slice(&chunk);
        }
        self.fs.release(fh);
        String::from_utf8(out).unwrap()
    }

    fn errors(&self) -> String {
        self.fs.engine().rejections_text()
    }
}

#[test]
fn lines_split_across_writes_become_whole_records() {
    let f = fixture();
    let dir = f.topic("t");
    let log = f.ino(dir, "log");
    let fh = f.fs.open(log, libc::O_WRONLY | libc::O_APPEND).unwrap().fh;
    for piece in ["k1:v", "1\nk2:", "v2\nk3:v3"] {
        assert_eq!(
            f.fs.write(fh, piece.as_bytes()).unwrap() as usize,
            piece.len()
        );
    }
    assert_eq!(f.read_all(log), "k1:v1\nk2:v2\n");
    // The unterminated last line is a record once the writer closes.
    f.fs.release(fh);
    assert_eq!(f.read_all(log), "k1:v1\nk2:v2\nk3:v3\n");
    assert_eq!(f.fs.getattr(log).unwrap().size, 18);
}

#[test]
fn a_refused_write_leaves_the_pending_line_unchanged() {
    let f = fixture();
    let dir = f.topic("t");
    let config = f.ino(dir, "config");
    let cfh = f.fs.open(config, libc::O_WRONLY).unwrap().fh;
    f.fs.write(cfh, b"max.message.bytes=200").unwrap();
    f.fs.release(cfh);

    let log = f.ino(dir, "log");
    let fh = f.fs.open(log, libc::O_WRONLY | libc::O_APPEND).unwrap().fh;
    f.fs.write(fh, b"k:v").unwrap();
    let huge = vec![b'x'; 400];
    assert_eq!(f.fs.write(fh, &huge).unwrap_err().errno, libc::EFBIG);
    assert!(f.errors().contains("t/log: "), "{}", f.errors());
    f.fs.write(fh, b"w\n").unwrap();
    f.fs.release(fh);
    assert_eq!(f.read_all(log), "k:vw\n");
}

#[test]
fn truncating_log_is_refused_but_truncating_config_replaces_the_overrides() {
    let f = fixture();
    let dir = f.topic("t");
    let log = f.ino(dir, "log");
    let truncate = SetAttr {
        size: Some(0),
        times: true,
        ..SetAttr::default()
    };
    assert_eq!(f.fs.setattr(log, truncate).unwrap_err().errno, libc::EPERM);
    assert!(f.errors().contains("t/log: "), "{}", f.errors());
    assert!(f.errors().contains(">>"), "{}", f.errors());
    let config = f.ino(dir, "config");
    set_config(&f, config, "retention.ms=1000\nflush.ms=5\n");
    // `>`: the truncation through the handle makes its lines the whole set of overrides.
    let fh = f.fs.open(config, libc::O_WRONLY).unwrap().fh;
    f.fs.setattr(
        config,
        SetAttr {
            fh: Some(fh),
            ..truncate
        },
    )
    .unwrap();
    f.fs.write_by(fh, b"segment.ms=7\n", Some(WRITER)).unwrap();
    f.fs.flush(fh, WRITER).unwrap();
    f.fs.release(fh);
    assert_eq!(overrides(&f, config), "segment.ms=7\n");
    // `truncate -s 0 config`: by path, every override goes at once.
    f.fs.setattr(config, truncate).unwrap();
    assert_eq!(overrides(&f, config), "");
    let touch = SetAttr {
        times: true,
        ..SetAttr::default()
    };
    assert_eq!(f.fs.setattr(config, touch).unwrap_err().errno, libc::EPERM);
}

/// The lock owner of the process that writes in these tests.
const WRITER: u64 = 7;

/// Writes `text` to `config` with `>>` and closes it.
fn set_config(f: &Fixture, config: u64, text: &str) {
    let fh =
        f.fs.open(config, libc::O_WRONLY | libc::O_APPEND)
            .unwrap()
            .fh;
    f.fs.write_by(fh, text.as_bytes(), Some(WRITER)).unwrap();
    f.fs.flush(fh, WRITER).unwrap();
    f.fs.release(fh);
}

/// The override lines `config` shows.
fn overrides(f: &Fixture, config: u64) -> String {
    let text = f.read_all(config);
    text.lines()
        .skip(1)
        .take_while(|l| *l != "# defaults")
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn a_config_change_applies_at_the_writers_close_all_or_nothing() {
    let f = fixture();
    let dir = f.topic("t");
    let config = f.ino(dir, "config");
    let fh =
        f.fs.open(config, libc::O_WRONLY | libc::O_APPEND)
            .unwrap()
            .fh;
    // bash: one write per line; nothing applies before the close.
    f.fs.write_by(fh, b"retention.ms=600000\n", Some(WRITER))
        .unwrap();
    f.fs.write_by(fh, b"segment.ms=3000\n", Some(WRITER))
        .unwrap();
    assert_eq!(overrides(&f, config), "");
    // A child that inherited the descriptor and exits closes it: not the end.
    f.fs.flush(fh, WRITER + 1).unwrap();
    assert_eq!(overrides(&f, config), "");
    f.fs.flush(fh, WRITER).unwrap();
    assert_eq!(
        overrides(&f, config),
        "retention.ms=600000\nsegment.ms=3000\n"
    );
    // One bad line: EINVAL at once with its reason, EINVAL at close, nothing applied.
    let before = f.errors();
    f.fs.write_by(fh, b"retention.bytes=300\n", Some(WRITER))
        .unwrap();
    let refused = f.fs.write_by(fh, b"segment.bytes=400\n", Some(WRITER));
    assert_eq!(refused.unwrap_err().errno, libc::EINVAL);
    let reason = "t/config: Invalid value 400 for configuration segment.bytes: Value must be at least 1048576";
    assert!(
        f.errors()[before.len()..].contains(reason),
        "{}",
        f.errors()
    );
    assert_eq!(f.fs.flush(fh, WRITER).unwrap_err().errno, libc::EINVAL);
    assert!(
        f.errors()[before.len()..].contains("t/config: nothing of this change applied"),
        "{}",
        f.errors()
    );
    f.fs.release(fh);
    assert_eq!(
        overrides(&f, config),
        "retention.ms=600000\nsegment.ms=3000\n"
    );
    // A check across keys fails the close.
    let fh =
        f.fs.open(config, libc::O_WRONLY | libc::O_APPEND)
            .unwrap()
            .fh;
    f.fs.write_by(fh, b"min.compaction.lag.ms=5000\n", Some(WRITER))
        .unwrap();
    f.fs.write_by(fh, b"max.compaction.lag.ms=1000\n", Some(WRITER))
        .unwrap();
    assert_eq!(f.fs.flush(fh, WRITER).unwrap_err().errno, libc::EINVAL);
    f.fs.release(fh);
    assert!(f.errors().ends_with(
        "t/config: conflict topic config setting min.compaction.lag.ms (5000) > max.compaction.lag.ms (1000)\n"
    ));
    assert_eq!(
        overrides(&f, config),
        "retention.ms=600000\nsegment.ms=3000\n"
    );
}

#[test]
fn a_broker_config_change_applies_at_close_too() {
    let f = fixture();
    let control = f.ino(ROOT_INO, ".kpfs");
    let config = f.ino(control, "config");
    let fh = f.fs.open(config, libc::O_WRONLY).unwrap().fh;
    f.fs.write_by(fh, b"log.segment.delete.delay.ms=5", Some(WRITER))
        .unwrap();
    assert_eq!(
        f.fs.engine()
            .broker_config()
            .topic_defaults()
            .file_delete_delay_ms,
        60_000
    );
    f.fs.flush(fh, WRITER).unwrap();
    assert_eq!(
        f.fs.engine()
            .broker_config()
            .topic_defaults()
            .file_delete_delay_ms,
        5
    );
    f.fs.release(fh);
    let fh = f.fs.open(config, libc::O_WRONLY).unwrap().fh;
    let refused = f.fs.write_by(fh, b"log.roll.hours=1\n", Some(WRITER));
    assert_eq!(refused.unwrap_err().errno, libc::EINVAL);
    assert!(f
        .errors()
        .contains(".kpfs/config: Cannot update these configs dynamically: [log.roll.hours]"));
    assert_eq!(f.fs.flush(fh, WRITER).unwrap_err().errno, libc::EINVAL);
    f.fs.release(fh);
}

#[test]
fn saving_in_an_editor_leaves_no_record() {
    let f = fixture();
    let dir = f.topic("t");
    let config = f.ino(dir, "config");
    let perm = f.fs.getattr(config).unwrap().perm;
    // vim: O_EXCL creates of its swap and probe files, chmod and the access ACL of the
    // mode the file has, owner unchanged.
    let probe = f.fs.refuse_namespace(
        crate::fs::NamespaceOp::CreateExclusive,
        dir,
        OsStr::new(".config.swp"),
    );
    assert_eq!(probe.errno, libc::EPERM);
    let chmod = SetAttr {
        mode: Some(libc::S_IFREG | u32::from(perm)),
        uid: Some(f.fs.getattr(config).unwrap().uid),
        ..SetAttr::default()
    };
    f.fs.setattr(config, chmod).unwrap();
    let acl = minimal_acl(perm);
    f.fs.setxattr(config, OsStr::new("system.posix_acl_access"), &acl)
        .unwrap();
    assert_eq!(f.errors(), "");
    // A change of any of them is refused, with a reason.
    let other = SetAttr {
        mode: Some(libc::S_IFREG | 0o600),
        ..SetAttr::default()
    };
    assert_eq!(f.fs.setattr(config, other).unwrap_err().errno, libc::EPERM);
    let acl = minimal_acl(0o600);
    let e =
        f.fs.setxattr(config, OsStr::new("system.posix_acl_access"), &acl);
    assert_eq!(e.unwrap_err().errno, libc::EPERM);
    let e = f.fs.setxattr(config, OsStr::new("user.x"), b"1");
    assert_eq!(e.unwrap_err().errno, libc::EPERM);
    let e =
        f.fs.refuse_namespace(crate::fs::NamespaceOp::Create, dir, OsStr::new("x"));
    assert_eq!(e.errno, libc::EPERM);
    assert_eq!(f.errors().lines().count(), 4, "{}", f.errors());
}

/// The `system.posix_acl_access` value `acl_set_file` writes for a plain mode.
fn minimal_acl(perm: u16) -> Vec<u8> {
    let mut acl = 2u32.to_le_bytes().to_vec();
    for (tag, shift) in [(0x01u16, 6), (0x04, 3), (0x20, 0)] {
        acl.extend_from_slice(&tag.to_le_bytes());
        acl.extend_from_slice(&((perm >> shift) & 0o7).to_le_bytes());
        acl.extend_from_slice(&u32::MAX.to_le_bytes());
    }
    acl
}

#[test]
fn directories_are_topics_in_the_root_only() {
    let f = fixture();
    let reserved = f.fs.mkdir(ROOT_INO, OsStr::new(".kpfs")).unwrap_err();
    assert_eq!(reserved.errno, libc::EPERM);
    let invalid = f.fs.mkdir(ROOT_INO, OsStr::new("bad name")).unwrap_err();
    assert_eq!(invalid.errno, libc::EINVAL);
    let dir = f.topic("t");
    let nested = f.fs.mkdir(dir, OsStr::new("sub")).unwrap_err();
    assert_eq!(nested.errno, libc::EPERM);
    assert!(f.errors().contains("t/sub: "), "{}", f.errors());
    let duplicate = f.fs.mkdir(ROOT_INO, OsStr::new("t")).unwrap_err();
    assert_eq!(duplicate.errno, libc::EEXIST);
}

#[test]
fn a_deleted_topic_is_gone_from_listing_and_inode_table() {
    let f = fixture();
    let dir = f.topic("t");
    let log = f.ino(dir, "log");
    f.fs.rmdir(ROOT_INO, OsStr::new("t")).unwrap();
    assert_eq!(f.fs.getattr(log).unwrap_err().errno, libc::ENOENT);
    let root = f.fs.opendir(ROOT_INO).unwrap().fh;
    let names: Vec<String> =
        f.fs.readdir(root, 0)
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
    assert_eq!(names, [".", "..", ".kpfs"]);
    assert_eq!(
        f.fs.rmdir(ROOT_INO, OsStr::new("t")).unwrap_err().errno,
        libc::ENOENT
    );
}

#[test]
fn read_only_files_refuse_write_opens_with_a_reason() {
    let f = fixture();
    let dir = f.topic("t");
    let status = f.ino(dir, "status");
    assert_eq!(
        f.fs.open(status, libc::O_WRONLY).unwrap_err().errno,
        libc::EACCES
    );
    assert!(f.errors().contains("t/status: "), "{}", f.errors());
}

fn listing(f: &Fixture, dir: u64) -> Vec<String> {
    let fh = f.fs.opendir(dir).unwrap().fh;
    let names =
        f.fs.readdir(fh, 0)
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
    f.fs.releasedir(fh);
    names
}

#[test]
fn events_and_metrics_are_listed_read_only_snapshots() {
    let f = fixture();
    let dir = f.topic("t");
    assert_eq!(
        listing(&f, dir),
        [".", "..", "log", "config", "segments", "status", "events"]
    );
    let control = f.ino(ROOT_INO, ".kpfs");
    assert_eq!(
        listing(&f, control),
        [".", "..", "config", "errors", "metrics"]
    );

    let config = f.ino(dir, "config");
    let cfh = f.fs.open(config, libc::O_WRONLY).unwrap().fh;
    f.fs.write(cfh, b"parse.key=true").unwrap();
    f.fs.release(cfh);
    let log = f.ino(dir, "log");
    let fh = f.fs.open(log, libc::O_WRONLY | libc::O_APPEND).unwrap().fh;
    f.fs.write(fh, b"no separator here\n").unwrap_err();
    f.fs.release(fh);
    let events = f.ino(dir, "events");
    let text = f.read_all(events);
    assert!(
        text.contains(" refused-append No key separator found"),
        "{text}"
    );
    assert_eq!(f.fs.getattr(events).unwrap().size, text.len() as u64);
    assert_eq!(f.fs.getattr(events).unwrap().perm, 0o444);

    let metrics = f.ino(control, "metrics");
    let text = f.read_all(metrics);
    assert!(
        text.contains("kpfs_refused_records_total{topic=\"t\",reason=\"invalid\"} 1\n"),
        "{text}"
    );
    assert_eq!(f.fs.getattr(metrics).unwrap().size, text.len() as u64);

    for (ino, path) in [(events, "t/events"), (metrics, ".kpfs/metrics")] {
        assert_eq!(
            f.fs.open(ino, libc::O_RDWR).unwrap_err().errno,
            libc::EACCES
        );
        assert!(f.errors().contains(&format!("{path}: ")), "{}", f.errors());
        let truncate = SetAttr {
            size: Some(0),
            ..SetAttr::default()
        };
        assert_eq!(f.fs.setattr(ino, truncate).unwrap_err().errno, libc::EPERM);
    }
}

#[test]
fn an_overlong_unterminated_line_counts_as_a_too_large_refusal() {
    let f = fixture();
    let dir = f.topic("t");
    let config = f.ino(dir, "config");
    let cfh = f.fs.open(config, libc::O_WRONLY).unwrap().fh;
    f.fs.write(cfh, b"max.message.bytes=100").unwrap();
    f.fs.release(cfh);
    let log = f.ino(dir, "log");
    let fh = f.fs.open(log, libc::O_WRONLY | libc::O_APPEND).unwrap().fh;
    assert_eq!(f.fs.write(fh, &[b'x'; 300]).unwrap_err().errno, libc::EFBIG);
    f.fs.release(fh);
    let metrics = crate::engine::metrics::render(f.fs.engine());
    assert!(
        metrics.contains("kpfs_refused_records_total{topic=\"t\",reason=\"too_large\"} 1\n"),
        "{metrics}"
    );
}
