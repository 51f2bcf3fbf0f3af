//! `KpfsFs` driven directly, without a kernel: the line assembly of `log` writes, the
//! all-or-nothing rule for refused writes, and the refusals that must leave a reason.

use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use crate::engine::groups::JoinRequest;
use crate::engine::{BrokerConfig, Clock, Engine, EngineOptions, SystemClock};
use crate::fs::inode::ROOT_INO;
use crate::fs::{KpfsFs, NamespaceOp, SetAttr};

struct Fixture {
    fs: KpfsFs<Engine>,
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
        self.fs.store().rejections_text()
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

impl Fixture {
    fn set_config(&self, dir: u64, text: &str) {
        let config = self.ino(dir, "config");
        let fh = self.fs.open(config, libc::O_WRONLY).unwrap().fh;
        self.fs.write(fh, text.as_bytes()).unwrap();
        self.fs.release(fh);
    }

    fn open_log(&self, dir: u64) -> u64 {
        let log = self.ino(dir, "log");
        self.fs
            .open(log, libc::O_WRONLY | libc::O_APPEND)
            .unwrap()
            .fh
    }
}

/// Issue 12, item 1: a piece of a line refused leaves no truncated copy of the line. The
/// start the handle held is dropped, the pieces that follow up to the newline are refused
/// too, and the next line is appended.
#[test]
fn nothing_of_a_line_refused_in_part_is_stored() {
    let f = fixture();
    let dir = f.topic("t");
    f.set_config(dir, "max.message.bytes=200");
    let fh = f.open_log(dir);
    f.fs.write(fh, b"k:v").unwrap();
    assert_eq!(f.fs.write(fh, &[b'x'; 400]).unwrap_err().errno, libc::EFBIG);
    let more = f.fs.write(fh, b"w\nnext\n").unwrap_err();
    assert_eq!(more.errno, libc::EFBIG);
    assert!(
        more.message
            .contains("this write carries more of a refused line"),
        "{}",
        more.message
    );
    f.fs.write(fh, b"after\n").unwrap();
    f.fs.release(fh);
    assert_eq!(f.read_all(f.ino(dir, "log")), "after\n");
    // One record refused, however many writes carried it.
    let metrics = crate::engine::metrics::render(f.fs.store());
    assert!(
        metrics.contains(
            "kpfs_refused_records_total{topic=\"t\",partition=\"0\",reason=\"too_large\"} 1\n"
        ),
        "{metrics}"
    );
}

/// A line whose end comes in the write that is refused: that write's newline ends it, so
/// the next line is appended; but a program told that a write(2) was written only in
/// part sends the rest again, which starts with the refused line's tail, and that resend
/// is refused too.
#[test]
fn a_line_refused_at_its_end_leaves_nothing_and_a_resend_of_its_tail_is_refused() {
    let f = fixture();
    let dir = f.topic("t");
    f.set_config(dir, "max.message.bytes=1000");
    let fh = f.open_log(dir);
    f.fs.write(fh, &[b'y'; 600]).unwrap();
    let rest = [&[b'y'; 600][..], b"\nz\n"].concat();
    assert_eq!(f.fs.write(fh, &rest).unwrap_err().errno, libc::EFBIG);
    assert_eq!(f.fs.write(fh, &rest).unwrap_err().errno, libc::EFBIG);
    assert_eq!(f.fs.write(fh, &rest).unwrap_err().errno, libc::EFBIG);
    f.fs.write(fh, b"next\n").unwrap();
    // Only the write right after the refusal can be its resend.
    f.fs.write(fh, &rest).unwrap();
    f.fs.release(fh);
    let log = f.read_all(f.ino(dir, "log"));
    assert_eq!(log, format!("next\n{}\nz\n", "y".repeat(600)));
}

/// Whatever the refusal, the line a refused write leaves unterminated is refused up to
/// its newline, which the next writes bring; a write refused whole at a line start that
/// ends with a newline leaves nothing behind.
#[test]
fn the_unterminated_line_of_a_refused_write_is_refused_up_to_its_newline() {
    let f = fixture();
    let dir = f.topic("t");
    f.set_config(dir, "parse.key=true\nkey.separator=:");
    let fh = f.open_log(dir);
    assert_eq!(
        f.fs.write(fh, b"a:1\nno separator\nc:").unwrap_err().errno,
        libc::EINVAL
    );
    assert_eq!(f.fs.write(fh, b"3").unwrap_err().errno, libc::EINVAL);
    assert_eq!(f.fs.write(fh, b"3\n").unwrap_err().errno, libc::EINVAL);
    f.fs.write(fh, b"d:4\n").unwrap();
    assert_eq!(
        f.fs.write(fh, b"no separator\n").unwrap_err().errno,
        libc::EINVAL
    );
    f.fs.write(fh, b"e:5\n").unwrap();
    f.fs.release(fh);
    assert_eq!(f.read_all(f.ino(dir, "log")), "d:4\ne:5\n");
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
    f.fs.write_from(fh, b"segment.ms=7\n", Some(WRITER))
        .unwrap();
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

#[test]
fn an_o_trunc_open_of_a_config_file_truncates_with_its_change() {
    let f = fixture();
    let dir = f.topic("t");
    let config = f.ino(dir, "config");
    set_config(&f, config, "retention.ms=1000\n");
    // `>` with a refused line (the kernel's atomic O_TRUNC open): nothing changes.
    let fh =
        f.fs.open(config, libc::O_WRONLY | libc::O_TRUNC)
            .unwrap()
            .fh;
    let err = f.fs.write_from(fh, b"segment.ms=soon\n", Some(WRITER));
    assert_eq!(err.unwrap_err().errno, libc::EINVAL);
    assert_eq!(f.fs.flush(fh, WRITER).unwrap_err().errno, libc::EINVAL);
    f.fs.release(fh);
    assert_eq!(overrides(&f, config), "retention.ms=1000\n");
    // Accepted lines are the whole set at close; a `>` of nothing empties it.
    let fh =
        f.fs.open(config, libc::O_WRONLY | libc::O_TRUNC)
            .unwrap()
            .fh;
    f.fs.write_from(fh, b"segment.ms=7\n", Some(WRITER))
        .unwrap();
    assert_eq!(
        overrides(&f, config),
        "retention.ms=1000\n",
        "before the close"
    );
    f.fs.flush(fh, WRITER).unwrap();
    f.fs.release(fh);
    assert_eq!(overrides(&f, config), "segment.ms=7\n");
    let fh =
        f.fs.open(config, libc::O_WRONLY | libc::O_TRUNC)
            .unwrap()
            .fh;
    f.fs.release(fh);
    assert_eq!(overrides(&f, config), "");
    // `> log` is refused at the open, which leaves no handle behind.
    let log = f.ino(dir, "log");
    let err = f.fs.open(log, libc::O_WRONLY | libc::O_TRUNC).unwrap_err();
    assert_eq!(err.errno, libc::EPERM);
}

/// The lock owner of the process that writes in these tests.
const WRITER: u64 = 7;

/// Writes `text` to `config` with `>>` and closes it.
fn set_config(f: &Fixture, config: u64, text: &str) {
    let fh =
        f.fs.open(config, libc::O_WRONLY | libc::O_APPEND)
            .unwrap()
            .fh;
    f.fs.write_from(fh, text.as_bytes(), Some(WRITER)).unwrap();
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
    f.fs.write_from(fh, b"retention.ms=600000\n", Some(WRITER))
        .unwrap();
    f.fs.write_from(fh, b"segment.ms=3000\n", Some(WRITER))
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
    f.fs.write_from(fh, b"retention.bytes=300\n", Some(WRITER))
        .unwrap();
    let refused = f.fs.write_from(fh, b"segment.bytes=400\n", Some(WRITER));
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
}

#[test]
fn the_write_that_makes_a_config_invalid_across_keys_fails() {
    let f = fixture();
    let dir = f.topic("t");
    let config = f.ino(dir, "config");
    set_config(&f, config, "retention.ms=600000\n");
    // bash writes once per line: the second line, valid alone, makes the config invalid,
    // and its write says so (bash prints it); nothing of the change applies at close.
    let fh =
        f.fs.open(config, libc::O_WRONLY | libc::O_APPEND)
            .unwrap()
            .fh;
    f.fs.write_from(fh, b"min.compaction.lag.ms=5000\n", Some(WRITER))
        .unwrap();
    let refused =
        f.fs.write_from(fh, b"max.compaction.lag.ms=1000\n", Some(WRITER));
    assert_eq!(refused.unwrap_err().errno, libc::EINVAL);
    assert!(f.errors().ends_with(
        "t/config: conflict topic config setting min.compaction.lag.ms (5000) > max.compaction.lag.ms (1000)\n"
    ), "{}", f.errors());
    // Later lines are checked alone, as after any refused line.
    f.fs.write_from(fh, b"max.compaction.lag.ms=9000\n", Some(WRITER))
        .unwrap();
    assert_eq!(f.fs.flush(fh, WRITER).unwrap_err().errno, libc::EINVAL);
    f.fs.release(fh);
    assert!(f
        .errors()
        .ends_with("t/config: nothing of this change applied: line 2 of 3 was refused\n"));
    assert_eq!(overrides(&f, config), "retention.ms=600000\n");
    // Lines apply in order: the same end state, reached through valid steps, applies.
    let fh =
        f.fs.open(config, libc::O_WRONLY | libc::O_APPEND)
            .unwrap()
            .fh;
    for line in [
        "max.compaction.lag.ms=1000\n",
        "min.compaction.lag.ms=500\n",
    ] {
        f.fs.write_from(fh, line.as_bytes(), Some(WRITER)).unwrap();
    }
    f.fs.flush(fh, WRITER).unwrap();
    f.fs.release(fh);
    assert_eq!(
        overrides(&f, config),
        "max.compaction.lag.ms=1000\nmin.compaction.lag.ms=500\nretention.ms=600000\n"
    );
    // One write is checked as a whole: its lines may pass through an invalid state.
    let fh = f.fs.open(config, libc::O_WRONLY).unwrap().fh;
    f.fs.setattr(
        config,
        SetAttr {
            size: Some(0),
            fh: Some(fh),
            ..SetAttr::default()
        },
    )
    .unwrap();
    f.fs.write_from(
        fh,
        b"min.compaction.lag.ms=5000\nmax.compaction.lag.ms=9000\n",
        Some(WRITER),
    )
    .unwrap();
    f.fs.flush(fh, WRITER).unwrap();
    f.fs.release(fh);
    assert_eq!(
        overrides(&f, config),
        "max.compaction.lag.ms=9000\nmin.compaction.lag.ms=5000\n"
    );
}

#[test]
fn the_write_that_breaks_a_cleaner_rule_of_the_broker_fails() {
    let f = fixture();
    let control = f.ino(ROOT_INO, ".kpfs");
    let config = f.ino(control, "config");
    for (line, reason) in [
        (
            "log.cleaner.threads=3\n",
            "Log cleaner threads cannot be increased to more than double the current value 1",
        ),
        (
            "log.cleaner.dedupe.buffer.size=1048576\n",
            "log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread",
        ),
    ] {
        let fh =
            f.fs.open(config, libc::O_WRONLY | libc::O_APPEND)
                .unwrap()
                .fh;
        let refused = f.fs.write_from(fh, line.as_bytes(), Some(WRITER));
        assert_eq!(refused.unwrap_err().errno, libc::EINVAL, "{line}");
        assert!(f.errors().contains(reason), "{}", f.errors());
        assert_eq!(f.fs.flush(fh, WRITER).unwrap_err().errno, libc::EINVAL);
        f.fs.release(fh);
    }
    assert_eq!(f.fs.store().broker_config().cleaner_threads(), 1);
    // Doubling, then doubling again in a later change, is how 1 becomes 4.
    set_config(&f, config, "log.cleaner.threads=2\n");
    set_config(&f, config, "log.cleaner.threads=4\n");
    assert_eq!(f.fs.store().broker_config().cleaner_threads(), 4);
}

#[test]
fn a_broker_config_change_applies_at_close_too() {
    let f = fixture();
    let control = f.ino(ROOT_INO, ".kpfs");
    let config = f.ino(control, "config");
    let fh = f.fs.open(config, libc::O_WRONLY).unwrap().fh;
    f.fs.write_from(fh, b"log.segment.delete.delay.ms=5", Some(WRITER))
        .unwrap();
    assert_eq!(
        f.fs.store()
            .broker_config()
            .topic_defaults()
            .file_delete_delay_ms,
        60_000
    );
    f.fs.flush(fh, WRITER).unwrap();
    assert_eq!(
        f.fs.store()
            .broker_config()
            .topic_defaults()
            .file_delete_delay_ms,
        5
    );
    f.fs.release(fh);
    let fh = f.fs.open(config, libc::O_WRONLY).unwrap().fh;
    let refused = f.fs.write_from(fh, b"log.roll.hours=1\n", Some(WRITER));
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
    for probe in [".config.swp", "config~", "4913"] {
        let e = f.fs.create(dir, OsStr::new(probe), true).unwrap_err();
        assert_eq!(e.errno, libc::EPERM, "{probe}");
    }
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
    let e = f.fs.create(dir, OsStr::new("x"), false).unwrap_err();
    assert_eq!(e.errno, libc::EPERM);
    assert_eq!(f.errors().lines().count(), 4, "{}", f.errors());
}

/// What `sed -i` does to a config file: create `sedXXXXXX` beside it, fchown and fchmod
/// it to what the file has, write the edited text, close it, rename it over the file.
fn sed_edit(f: &Fixture, dir: u64, temp: &str, text: &str) -> Result<(), i32> {
    let (entry, opened) =
        f.fs.create(dir, OsStr::new(temp), true)
            .map_err(|e| e.errno)?;
    let same = SetAttr {
        mode: Some(libc::S_IFREG | 0o644),
        uid: Some(entry.attr.uid),
        gid: Some(entry.attr.gid),
        ..SetAttr::default()
    };
    f.fs.setattr(entry.attr.ino, same).unwrap();
    f.fs.setxattr(
        entry.attr.ino,
        OsStr::new("system.posix_acl_access"),
        &minimal_acl(0o644),
    )
    .unwrap();
    let written = f.fs.write_from(opened.fh, text.as_bytes(), Some(WRITER));
    f.fs.flush(opened.fh, WRITER).unwrap();
    f.fs.release(opened.fh);
    if let Err(e) = written {
        // sed removes its temporary when a write fails.
        f.fs.unlink(dir, OsStr::new(temp)).unwrap();
        return Err(e.errno);
    }
    assert_eq!(
        f.fs.getattr(entry.attr.ino).unwrap().size,
        text.len() as u64
    );
    f.fs.rename(dir, OsStr::new(temp), dir, OsStr::new("config"), true)
        .map_err(|e| e.errno)
}

#[test]
fn a_sed_temporary_renamed_over_config_applies_as_the_whole_file() {
    let f = fixture();
    let dir = f.topic("t");
    let config = f.ino(dir, "config");
    set_config(&f, config, "retention.ms=600000\nflush.ms=7\n");
    // The edited text of the whole file: the lines are the overrides.
    let edited = f
        .read_all(config)
        .replace("retention.ms=600000", "retention.ms=700000");
    let edited = edited.replace("flush.ms=7\n", "");
    sed_edit(&f, dir, "sedAb12Cd", &edited).unwrap();
    assert_eq!(overrides(&f, config), "retention.ms=700000\n");
    assert!(!listing(&f, dir).contains(&"sedAb12Cd".to_string()));
    assert_eq!(
        f.fs.lookup(dir, OsStr::new("sedAb12Cd")).unwrap_err().errno,
        libc::ENOENT
    );
    // .kpfs/config the same way.
    let control = f.ino(ROOT_INO, ".kpfs");
    sed_edit(&f, control, "sed000000", "log.cleaner.backoff.ms=999\n").unwrap();
    assert_eq!(f.fs.store().broker_config().cleaner_backoff_ms(), 999);
    // A bad line fails its write; nothing changes, the reason names the temporary.
    let refused = sed_edit(&f, dir, "sedZZZZZZ", "segment.bytes=400\n");
    assert_eq!(refused, Err(libc::EINVAL));
    assert!(f.errors().contains(
        "t/sedZZZZZZ: Invalid value 400 for configuration segment.bytes: Value must be at least 1048576"
    ), "{}", f.errors());
    assert_eq!(overrides(&f, config), "retention.ms=700000\n");
    // A conflict found only at the rename fails the rename, and nothing changes.
    let (_, opened) = f.fs.create(dir, OsStr::new("sedYYYYYY"), true).unwrap();
    f.fs.write_from(opened.fh, b"segment.bytes=x", Some(WRITER))
        .unwrap();
    f.fs.release(opened.fh);
    let e =
        f.fs.rename(
            dir,
            OsStr::new("sedYYYYYY"),
            dir,
            OsStr::new("config"),
            true,
        )
        .unwrap_err();
    assert_eq!(e.errno, libc::EINVAL);
    assert!(f
        .errors()
        .contains("t/config: nothing of this change applied"));
    assert_eq!(overrides(&f, config), "retention.ms=700000\n");
    // Until removed, a draft is a file of the folder; it renames over nothing else.
    assert!(listing(&f, dir).contains(&"sedYYYYYY".to_string()));
    let e =
        f.fs.rename(dir, OsStr::new("sedYYYYYY"), dir, OsStr::new("log"), true)
            .unwrap_err();
    assert_eq!(e.errno, libc::EPERM);
    f.fs.unlink(dir, OsStr::new("sedYYYYYY")).unwrap();
    assert!(!listing(&f, dir).contains(&"sedYYYYYY".to_string()));
    // Other names and other folders make no drafts.
    let segments = f.ino(dir, "segments");
    for (parent, name) in [
        (dir, "sed12345"),
        (dir, "xsed123456"),
        (segments, "sed123456"),
        (ROOT_INO, "sed123456"),
    ] {
        let e = f.fs.create(parent, OsStr::new(name), true).unwrap_err();
        assert_eq!(e.errno, libc::EPERM, "{name}");
    }
    // A draft goes with its topic.
    f.fs.create(dir, OsStr::new("sedXXXXXX"), true).unwrap();
    f.fs.rmdir(ROOT_INO, OsStr::new("t")).unwrap();
    let dir = f.topic("t");
    assert_eq!(
        f.fs.lookup(dir, OsStr::new("sedXXXXXX")).unwrap_err().errno,
        libc::ENOENT
    );
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

fn enoent<T: std::fmt::Debug>(result: crate::fs::FsResult<T>, what: &str) {
    assert_eq!(result.unwrap_err().errno, libc::ENOENT, "{what}");
}

/// `rmdir` (and DeleteTopics, which deletes through the engine alone) cuts off every
/// descriptor opened before it: reads and writes fail with ENOENT, a read that left
/// bytes in its cursor included, and so they stay once a new topic has the name.
#[test]
fn descriptors_opened_before_a_deletion_reach_neither_it_nor_its_successor() {
    for through_rmdir in [true, false] {
        let f = fixture();
        let dir = f.topic("t");
        let (log, status) = (f.ino(dir, "log"), f.ino(dir, "status"));
        let writer = f.fs.open(log, libc::O_WRONLY | libc::O_APPEND).unwrap().fh;
        f.fs.write(writer, b"old record\n").unwrap();
        let reader = f.fs.open(log, libc::O_RDONLY).unwrap().fh;
        assert_eq!(f.fs.read(reader, 0, 4).unwrap(), b"old ");
        let status_fh = f.fs.open(status, libc::O_RDONLY).unwrap().fh;
        let segment = f.ino(f.ino(dir, "segments"), "00000000000000000000.log");
        let segment_fh = f.fs.open(segment, libc::O_RDONLY).unwrap().fh;
        let config = f.fs.open(f.ino(dir, "config"), libc::O_WRONLY).unwrap().fh;
        let start = f.ino(dir, "log_start_offset");
        let start_fh = f.fs.open(start, libc::O_WRONLY).unwrap().fh;
        f.fs.write(config, b"retention.ms=1000\n").unwrap();
        if through_rmdir {
            f.fs.rmdir(ROOT_INO, OsStr::new("t")).unwrap();
        } else {
            f.fs.store().delete_topic("t").unwrap();
        }
        let what = |what: &str| format!("{what} (through_rmdir={through_rmdir})");
        enoent(f.fs.read(reader, 4, 100), &what("the rest of the read"));
        enoent(f.fs.read(status_fh, 0, 100), &what("status"));
        enoent(f.fs.read(segment_fh, 0, 100), &what("segments/"));
        enoent(f.fs.write(writer, b"late\n"), &what("an append"));
        let dir = f.topic("t");
        let new_log = f.ino(dir, "log");
        let new_writer = f.fs.open(new_log, libc::O_WRONLY | libc::O_APPEND);
        f.fs.write(new_writer.unwrap().fh, b"a\nb\nnew record\n")
            .unwrap();
        enoent(f.fs.read(reader, 0, 100), &what("a read from the start"));
        enoent(f.fs.write(start_fh, b"2\n"), &what("log_start_offset"));
        enoent(f.fs.flush(config, 1), &what("the config change"));
        assert_eq!(f.read_all(new_log), "a\nb\nnew record\n");
        assert_eq!(f.read_all(f.ino(dir, "log_start_offset")), "0\n");
        assert!(!f
            .read_all(f.ino(dir, "config"))
            .contains("\nretention.ms=1000\n"));
    }
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
        [
            ".",
            "..",
            "log",
            "config",
            "segments",
            "status",
            "events",
            "log_start_offset",
            "partitions"
        ]
    );
    let control = f.ino(ROOT_INO, ".kpfs");
    assert_eq!(
        listing(&f, control),
        [
            ".",
            "..",
            "config",
            "errors",
            "metrics",
            "groups",
            "transactions",
            "snapshot"
        ]
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
        text.contains(
            "kpfs_refused_records_total{topic=\"t\",partition=\"0\",reason=\"invalid\"} 1\n"
        ),
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
    // Its smallest batch: Kafka's 61-byte header and a keyless record of the line so
    // far (9 bytes of record fields).
    assert!(
        f.errors().contains(
            "t/log: The record batch size in the append to t-0 is at least 370 bytes which \
             exceeds the maximum configured value of 100."
        ),
        "{}",
        f.errors()
    );
    f.fs.release(fh);
    let metrics = crate::engine::metrics::render(f.fs.store());
    assert!(
        metrics.contains(
            "kpfs_refused_records_total{topic=\"t\",partition=\"0\",reason=\"too_large\"} 1\n"
        ),
        "{metrics}"
    );
}

#[test]
fn a_topic_name_with_dots_or_underscores_is_created_with_kafkas_warning() {
    let f = fixture();
    f.topic("orders-v1");
    assert_eq!(f.errors(), "");
    f.topic("my.topic");
    let errors = f.errors();
    assert!(
        errors.ends_with(
            " my.topic: warning: Due to limitations in metric names, topics with a period \
             ('.') or underscore ('_') could collide. To avoid issues it is best to use \
             either, but not both.\n"
        ),
        "{errors}"
    );
    let refused = f.fs.mkdir(ROOT_INO, OsStr::new("my_topic")).unwrap_err();
    assert_eq!(refused.errno, libc::EINVAL);
    assert!(f
        .errors()
        .ends_with(" my_topic: Topic 'my_topic' collides with existing topic: my.topic\n"));
}

/// `du` through the mount adds up `st_blocks`: files of `segments/` report their backing
/// file's real allocation (the active indexes are sparse, preallocated to 10 MiB), while
/// generated files claim the blocks their bytes would fill.
#[test]
fn segment_files_report_their_real_blocks() {
    let f = fixture();
    let dir = f.topic("t");
    let log = f.ino(dir, "log");
    let fh = f.fs.open(log, libc::O_WRONLY | libc::O_APPEND).unwrap().fh;
    f.fs.write(fh, &[b'x'; 2000]).unwrap();
    f.fs.write(fh, b"\n").unwrap();
    f.fs.release(fh);
    let segments = f.ino(dir, "segments");
    let backing = f.fs.store().data_dir().join("t-0");
    for name in [
        "00000000000000000000.log",
        "00000000000000000000.index",
        "00000000000000000000.timeindex",
    ] {
        let attr = f.fs.getattr(f.ino(segments, name)).unwrap();
        let meta = std::fs::metadata(backing.join(name)).unwrap();
        assert_eq!(attr.size, meta.len(), "{name}");
        assert_eq!(attr.blocks, meta.blocks(), "{name}");
    }
    let index =
        f.fs.getattr(f.ino(segments, "00000000000000000000.index"))
            .unwrap();
    assert!(
        index.blocks < index.size / 512,
        "a preallocated index is sparse: {index:?}"
    );
    let attr = f.fs.getattr(log).unwrap();
    assert_eq!((attr.size, attr.blocks), (2001, 4));
}

/// A refused value is kept in `.kpfs/errors` as an excerpt with its length: one bad
/// 100 KB line, or a config value as long, must not make a 100 KB file.
#[test]
fn errors_keep_an_excerpt_of_a_long_refused_value() {
    let f = fixture();
    let dir = f.topic("t");
    let config = f.ino(dir, "config");
    let fh = f.fs.open(config, libc::O_WRONLY).unwrap().fh;
    let long_value = format!("segment.ms={}\n", "9".repeat(100_000));
    assert_eq!(
        f.fs.write(fh, long_value.as_bytes()).unwrap_err().errno,
        libc::EINVAL
    );
    f.fs.release(fh);
    let topic = f.fs.store().topic("t").unwrap();
    topic.update_config(b"parse.key=true\n").unwrap();
    let log = f.ino(dir, "log");
    let fh = f.fs.open(log, libc::O_WRONLY | libc::O_APPEND).unwrap().fh;
    let mut line = vec![b'x'; 100_000];
    line.push(b'\n');
    assert_eq!(f.fs.write(fh, &line).unwrap_err().errno, libc::EINVAL);
    f.fs.release(fh);
    let errors = f.errors();
    assert!(errors.len() < 2000, "{} bytes: {errors}", errors.len());
    let nines = "9".repeat(crate::engine::limits::EXCERPT_BYTES);
    assert!(
        errors.contains(&format!(
            " t/config: Invalid value {nines}... (100000 bytes) for configuration segment.ms: \
             Not a number of type LONG\n"
        )),
        "{errors}"
    );
    let xs = "x".repeat(crate::engine::limits::EXCERPT_BYTES);
    assert!(
        errors.contains(&format!(
            " t/log: No key separator found on line number 1: '{xs}...' (100000 bytes)\n"
        )),
        "{errors}"
    );
}

/// Issue 12, item 16: a line left without its newline becomes a record when the process
/// that wrote it closes the file (FLUSH, which close(2) waits for), not when another
/// process closes a copy of the descriptor it inherited, and not again at the last close.
#[test]
fn an_unterminated_line_becomes_a_record_at_its_writers_close() {
    let f = fixture();
    let dir = f.topic("t");
    let log = f.ino(dir, "log");
    let fh = f.open_log(dir);
    let (writer, child) = (7, 8);
    f.fs.write_from(fh, b"a\nab", Some(writer)).unwrap();
    f.fs.flush(fh, child).unwrap();
    f.fs.write_from(fh, b"c", Some(writer)).unwrap();
    assert_eq!(f.read_all(log), "a\n");
    f.fs.flush(fh, writer).unwrap();
    assert_eq!(f.read_all(log), "a\nabc\n");
    f.fs.write_from(fh, b"d", Some(writer)).unwrap();
    f.fs.release(fh);
    assert_eq!(f.read_all(log), "a\nabc\nd\n");
}

/// The writer's close(2) gets the refusal of the line it ends, and the line is gone.
#[test]
fn a_line_refused_at_its_writers_close_fails_the_close() {
    let f = fixture();
    let dir = f.topic("t");
    f.set_config(dir, "parse.key=true");
    let fh = f.open_log(dir);
    f.fs.write_from(fh, b"no separator", Some(1)).unwrap();
    assert_eq!(f.fs.flush(fh, 1).unwrap_err().errno, libc::EINVAL);
    assert!(
        f.errors()
            .contains("t/log: No key separator found on line number 1: 'no separator'"),
        "{}",
        f.errors()
    );
    f.fs.release(fh);
    assert_eq!(f.read_all(f.ino(dir, "log")), "");
}

/// The writer's close also ends a line refused before its newline came: what it writes
/// next is a new line. Another process's close does not.
#[test]
fn the_writers_close_ends_a_refused_line() {
    let f = fixture();
    let dir = f.topic("t");
    f.set_config(dir, "max.message.bytes=100");
    let fh = f.open_log(dir);
    let too_long = f.fs.write_from(fh, &[b'x'; 300], Some(1)).unwrap_err();
    assert_eq!(too_long.errno, libc::EFBIG);
    f.fs.flush(fh, 2).unwrap();
    let more = f.fs.write_from(fh, b"more", Some(1)).unwrap_err();
    assert_eq!(more.errno, libc::EFBIG);
    f.fs.flush(fh, 1).unwrap();
    f.fs.write_from(fh, b"next\n", Some(1)).unwrap();
    f.fs.release(fh);
    assert_eq!(f.read_all(f.ino(dir, "log")), "next\n");
}

/// At unmount the lines of writers that still hold `log` open become records, once.
#[test]
fn unmount_makes_the_lines_open_writers_left_records() {
    let f = fixture();
    let dir = f.topic("t");
    let fh = f.open_log(dir);
    f.fs.write_from(fh, b"done\nfrag", Some(1)).unwrap();
    f.fs.finish_open_writes();
    assert_eq!(f.read_all(f.ino(dir, "log")), "done\nfrag\n");
    f.fs.release(fh);
    assert_eq!(f.read_all(f.ino(dir, "log")), "done\nfrag\n");
}

#[test]
fn an_offset_written_to_log_start_offset_deletes_the_records_before_it() {
    let f = fixture();
    let dir = f.topic("t");
    let log = f.ino(dir, "log");
    let fh = f.fs.open(log, libc::O_WRONLY | libc::O_APPEND).unwrap().fh;
    f.fs.write(fh, b"a\nb\nc\nd\n").unwrap();
    f.fs.release(fh);
    let start = f.ino(dir, "log_start_offset");
    assert_eq!(f.read_all(start), "0\n");
    // `echo 2 > log_start_offset`: truncation, then the line.
    let fh = f.fs.open(start, libc::O_WRONLY | libc::O_TRUNC).unwrap().fh;
    let truncate = SetAttr {
        size: Some(0),
        fh: Some(fh),
        ..SetAttr::default()
    };
    f.fs.setattr(start, truncate).unwrap();
    f.fs.write(fh, b"2\n").unwrap();
    f.fs.release(fh);
    assert_eq!(f.read_all(start), "2\n");
    assert_eq!(f.read_all(log), "c\nd\n");
    // `printf 3`: the unterminated offset applies at close, and close reports a refusal.
    let fh = f.fs.open(start, libc::O_WRONLY).unwrap().fh;
    f.fs.write(fh, b"3").unwrap();
    f.fs.flush(fh, 1).unwrap();
    f.fs.release(fh);
    assert_eq!(f.read_all(log), "d\n");
    let fh = f.fs.open(start, libc::O_WRONLY).unwrap().fh;
    let err = f.fs.write(fh, b"9\n").unwrap_err();
    assert_eq!(err.errno, libc::ERANGE);
    let err = f.fs.write(fh, b"x\n").unwrap_err();
    assert_eq!(err.errno, libc::EINVAL);
    f.fs.release(fh);
    assert!(f.errors().contains(
        "t/log_start_offset: Cannot increment the log start offset to 9 of partition t-0 since it is larger than the high watermark 4"
    ));
    assert!(f.errors().contains(
        "t/log_start_offset: 'x' is not an offset: write the offset before which records are deleted"
    ));
    assert_eq!(f.read_all(start), "3\n");
}

/// Commits `offset` of topic `t` for `group` as a client outside group management does
/// (generation -1, no member id): the group exists, Empty, with that offset.
fn commit(f: &Fixture, group: &str, topic: &str, offset: i64) {
    let request = crate::engine::groups::CommitRequest {
        group_id: group.into(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        offsets: vec![crate::engine::groups::OffsetToCommit {
            topic: topic.into(),
            partition: 0,
            offset,
            leader_epoch: -1,
            metadata: None,
        }],
    };
    f.fs.store().ensure_offsets_topic().unwrap();
    let outcome = f.fs.store().groups().commit_offsets(&request).unwrap();
    assert_eq!(outcome, [None]);
}

#[test]
fn a_group_is_a_directory_of_kafkas_describe_tables_fresh_at_each_open() {
    let f = fixture();
    let dir = f.topic("t");
    let fh = f.open_log(dir);
    f.fs.write(fh, b"1\n2\n3\n4\n5\n").unwrap();
    f.fs.release(fh);
    commit(&f, "g", "t", 2);
    let control = f.ino(ROOT_INO, ".kpfs");
    let groups = f.ino(control, "groups");
    assert_eq!(listing(&f, groups), [".", "..", "g"]);
    let group = f.ino(groups, "g");
    assert_eq!(
        listing(&f, group),
        [".", "..", "state", "members", "offsets"]
    );

    let offsets = f.ino(group, "offsets");
    let text = f.read_all(offsets);
    assert_eq!(f.fs.getattr(offsets).unwrap().size, text.len() as u64);
    assert_eq!(f.fs.getattr(offsets).unwrap().perm, 0o444);
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[1],
        ["g", "t", "0", "2", "5", "3", "-", "-", "-"],
        "{text}"
    );
    let state = f.read_all(f.ino(group, "state"));
    let row: Vec<&str> = state.lines().nth(1).unwrap().split_whitespace().collect();
    // No listener: no coordinator address. No strategy for a group without members.
    assert_eq!(row[..3], ["g", "-", "Empty"], "{state}");
    assert_eq!(row[3], "0", "{state}");
    let members = f.read_all(f.ino(group, "members"));
    assert_eq!(members.lines().count(), 1, "{members}");

    // Lag follows appends, in the table, the topic's status and the metrics.
    let status = f.ino(dir, "status");
    assert!(
        f.read_all(status)
            .contains("\nconsumer_group: g committed_offset=2 lag=3\n"),
        "{}",
        f.read_all(status)
    );
    let held = f.fs.open(offsets, libc::O_RDONLY).unwrap().fh;
    let fh = f.open_log(dir);
    f.fs.write(fh, b"6\n").unwrap();
    f.fs.release(fh);
    assert!(
        f.read_all(offsets).contains(" 4 "),
        "a new open renders anew"
    );
    // An open handle keeps what it read first, so a reader never sees a torn table.
    assert_eq!(f.fs.read(held, 0, 1 << 16).unwrap(), text.as_bytes());
    f.fs.release(held);
    let metrics = f.read_all(f.ino(control, "metrics"));
    for series in [
        "kpfs_consumer_group_committed_offset{group=\"g\",topic=\"t\",partition=\"0\"} 2\n",
        "kpfs_consumer_group_lag{group=\"g\",topic=\"t\",partition=\"0\"} 4\n",
    ] {
        assert!(metrics.contains(series), "{series} in {metrics}");
    }

    // rmdir of a group without members deletes it (DeleteGroups).
    f.fs.rmdir(groups, OsStr::new("g")).unwrap();
    assert_eq!(f.fs.getattr(offsets).unwrap_err().errno, libc::ENOENT);
    assert_eq!(listing(&f, groups), [".", ".."]);
    assert!(!f.read_all(status).contains("consumer_group"));
    assert_eq!(
        f.fs.rmdir(groups, OsStr::new("g")).unwrap_err().errno,
        libc::ENOENT
    );
}

#[test]
fn a_group_id_that_is_no_file_name_is_shown_escaped() {
    let f = fixture();
    f.topic("t");
    commit(&f, "team/app", "t", 0);
    let control = f.ino(ROOT_INO, ".kpfs");
    let groups = f.ino(control, "groups");
    assert_eq!(listing(&f, groups), [".", "..", "team%2Fapp"]);
    let group = f.ino(groups, "team%2Fapp");
    assert!(f.read_all(f.ino(group, "offsets")).contains("\nteam/app "));
    assert_eq!(
        f.fs.lookup(groups, OsStr::new("team%2fapp"))
            .unwrap_err()
            .errno,
        libc::ENOENT
    );
    f.fs.rmdir(groups, OsStr::new("team%2Fapp")).unwrap();
    assert_eq!(listing(&f, groups), [".", ".."]);
}

#[test]
fn nothing_in_groups_but_a_group_can_be_created_changed_or_removed() {
    let f = fixture();
    f.topic("t");
    commit(&f, "g", "t", 0);
    let control = f.ino(ROOT_INO, ".kpfs");
    let groups = f.ino(control, "groups");
    let group = f.ino(groups, "g");
    let state = f.ino(group, "state");
    let refusals = [
        (
            f.fs.mkdir(groups, OsStr::new("new")).unwrap_err(),
            ".kpfs/groups/new",
        ),
        (
            f.fs.mkdir(group, OsStr::new("sub")).unwrap_err(),
            ".kpfs/groups/g/sub",
        ),
        (
            f.fs.refuse_namespace(NamespaceOp::Create, group, OsStr::new("notes")),
            ".kpfs/groups/g/notes",
        ),
        (
            f.fs.refuse_namespace(NamespaceOp::Unlink, group, OsStr::new("state")),
            ".kpfs/groups/g/state",
        ),
        (
            f.fs.refuse_namespace(NamespaceOp::Rename, groups, OsStr::new("g")),
            ".kpfs/groups/g",
        ),
    ];
    for (error, path) in refusals {
        assert_eq!(error.errno, libc::EPERM, "{path}");
        assert!(
            f.errors()
                .contains(&format!("{path}: .kpfs/groups is read-only")),
            "{path}: {}",
            f.errors()
        );
    }
    assert_eq!(
        f.fs.open(state, libc::O_WRONLY).unwrap_err().errno,
        libc::EACCES
    );
    let truncate = SetAttr {
        size: Some(0),
        ..SetAttr::default()
    };
    assert_eq!(
        f.fs.setattr(state, truncate).unwrap_err().errno,
        libc::EPERM
    );
    assert_eq!(
        f.fs.rmdir(control, OsStr::new("groups")).unwrap_err().errno,
        libc::EPERM
    );
    assert_eq!(
        f.fs.rmdir(group, OsStr::new("state")).unwrap_err().errno,
        libc::EPERM
    );
}

#[test]
fn a_group_with_members_refuses_rmdir_with_kafkas_error() {
    let f = fixture();
    f.topic("t");
    f.fs.store().ensure_offsets_topic().unwrap();
    let _join = f.fs.store().groups().join_group(JoinRequest {
        group_id: "g".into(),
        member_id: String::new(),
        group_instance_id: None,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Vec::new())],
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        client_id: "the-client".into(),
        client_host: "/127.0.0.1".into(),
        require_known_member_id: false,
        supports_skip_assignment: false,
        reason: None,
    });
    let control = f.ino(ROOT_INO, ".kpfs");
    let groups = f.ino(control, "groups");
    let error = f.fs.rmdir(groups, OsStr::new("g")).unwrap_err();
    assert_eq!(error.errno, libc::ENOTEMPTY);
    assert!(
        f.errors()
            .contains(" .kpfs/groups/g: The group g is not empty.\n"),
        "{}",
        f.errors()
    );
    let group = f.ino(groups, "g");
    let members = f.read_all(f.ino(group, "members"));
    let row: Vec<&str> = members.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(row[0], "g");
    assert_eq!(
        row[2..],
        ["/127.0.0.1", "the-client", "0", "-"],
        "{members}"
    );
    let state = f.read_all(f.ino(group, "state"));
    assert!(state.contains(" PreparingRebalance "), "{state}");
}

/// A mount on a clock the test moves.
fn fixture_on(clock: Arc<crate::engine::ManualClock>) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let broker = BrokerConfig::load(None, &[]).unwrap();
    let engine = Engine::open(dir.path(), broker, clock, EngineOptions::default()).unwrap();
    Fixture {
        fs: KpfsFs::new(Arc::new(engine), dir.path()),
        _dir: dir,
    }
}

/// `kafka-transactions.sh describe`'s row of `.kpfs/transactions/NAME`, its cells
/// without their padding.
fn transaction_row(f: &Fixture, ino: u64) -> Vec<String> {
    let text = f.read_all(ino);
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(text.starts_with(
        "CoordinatorId\tTransactionalId\tProducerId\tProducerEpoch\tTransactionState\t\
         TransactionTimeoutMs\tCurrentTransactionStartTimeMs\tTransactionDurationMs\t\
         TopicPartitions"
    ));
    let row = text.lines().nth(1).unwrap();
    assert!(row.ends_with('\t'), "{row:?}");
    row.trim_end_matches('\t')
        .split('\t')
        .map(|c| c.trim_end().to_string())
        .collect()
}

#[test]
fn a_transactional_id_is_a_file_of_kafkas_describe_table_on_the_engine_clock() {
    let clock = Arc::new(crate::engine::ManualClock::new(1_764_430_000_000));
    let f = fixture_on(clock.clone());
    f.topic("orders");
    f.topic("refunds");
    let control = f.ino(ROOT_INO, ".kpfs");
    let transactions = f.ino(control, "transactions");
    assert_eq!(listing(&f, transactions), [".", ".."]);
    let engine = f.fs.store();
    let producer = engine.init_transactional_producer("app/1", 60_000).unwrap();

    // Kafka's transactional ids are any string: escaped as group ids are.
    assert_eq!(listing(&f, transactions), [".", "..", "app%2F1"]);
    let file = f.ino(transactions, "app%2F1");
    let attr = f.fs.getattr(file).unwrap();
    assert_eq!(attr.perm, 0o444);
    assert_eq!(attr.size, f.read_all(file).len() as u64);
    let id = producer.0.to_string();
    // The coordinator is this node (node.id 1); no transaction open yet.
    assert_eq!(
        transaction_row(&f, file),
        ["1", "app/1", &id, "0", "Empty", "60000", "None", "None", ""]
    );

    let partitions = [("orders".to_string(), 0), ("refunds".to_string(), 0)];
    let added = engine
        .add_partitions_to_txn("app/1", producer, &partitions)
        .unwrap();
    assert_eq!(added, [None, None]);
    let started = clock.now_ms().to_string();
    clock.advance(1_234);
    // The partitions in the order Kafka's admin client keeps them (a Java HashSet).
    assert_eq!(
        transaction_row(&f, file),
        [
            "1",
            "app/1",
            &id,
            "0",
            "Ongoing",
            "60000",
            &started,
            "1234",
            "refunds-0,orders-0"
        ]
    );
    // The duration is the engine clock's at each open; an open handle keeps its text.
    let held = f.fs.open(file, libc::O_RDONLY).unwrap().fh;
    let first = f.fs.read(held, 0, 1 << 16).unwrap();
    clock.advance(100);
    assert_eq!(transaction_row(&f, file)[7], "1334");
    assert_eq!(f.fs.read(held, 0, 1 << 16).unwrap(), first);
    f.fs.release(held);

    engine.end_txn("app/1", producer, true, 0).unwrap();
    let row = transaction_row(&f, file);
    assert_eq!(row[4..], ["CompleteCommit", "60000", &started, "1334", ""]);

    // An id idle past transactional.id.expiration.ms (7 days) leaves with its file.
    clock.advance(7 * 24 * 3_600_000);
    engine.run_transaction_timers_once();
    assert_eq!(f.fs.getattr(file).unwrap_err().errno, libc::ENOENT);
    assert_eq!(
        f.fs.lookup(transactions, OsStr::new("app%2F1"))
            .unwrap_err()
            .errno,
        libc::ENOENT
    );
    assert_eq!(listing(&f, transactions), [".", ".."]);
    // ... and its inode with the listing that no longer has it.
    assert_eq!(f.fs.getattr(file).unwrap_err().errno, libc::ENOENT);
    engine.init_transactional_producer("app/1", 60_000).unwrap();
    assert_ne!(f.ino(transactions, "app%2F1"), file);
}

#[test]
fn nothing_in_transactions_can_be_created_changed_or_removed() {
    let f = fixture();
    f.fs.store()
        .init_transactional_producer("t-1", 60_000)
        .unwrap();
    let control = f.ino(ROOT_INO, ".kpfs");
    let transactions = f.ino(control, "transactions");
    let file = f.ino(transactions, "t-1");
    let refusals = [
        (
            f.fs.mkdir(transactions, OsStr::new("new")).unwrap_err(),
            ".kpfs/transactions/new",
        ),
        (
            f.fs.refuse_namespace(NamespaceOp::Create, transactions, OsStr::new("t-2")),
            ".kpfs/transactions/t-2",
        ),
        (
            f.fs.refuse_namespace(NamespaceOp::Unlink, transactions, OsStr::new("t-1")),
            ".kpfs/transactions/t-1",
        ),
        (
            f.fs.refuse_namespace(NamespaceOp::Rename, transactions, OsStr::new("t-1")),
            ".kpfs/transactions/t-1",
        ),
        (
            f.fs.rmdir(transactions, OsStr::new("t-1")).unwrap_err(),
            ".kpfs/transactions/t-1",
        ),
    ];
    for (error, path) in refusals {
        assert_eq!(error.errno, libc::EPERM, "{path}");
        assert!(
            f.errors()
                .contains(&format!("{path}: .kpfs/transactions is read-only")),
            "{path}: {}",
            f.errors()
        );
    }
    assert_eq!(
        f.fs.open(file, libc::O_WRONLY).unwrap_err().errno,
        libc::EACCES
    );
    assert_eq!(
        f.fs.open(transactions, libc::O_RDONLY).unwrap_err().errno,
        libc::EISDIR
    );
    let truncate = SetAttr {
        size: Some(0),
        ..SetAttr::default()
    };
    assert_eq!(f.fs.setattr(file, truncate).unwrap_err().errno, libc::EPERM);
    assert_eq!(
        f.fs.rmdir(control, OsStr::new("transactions"))
            .unwrap_err()
            .errno,
        libc::EPERM
    );
    assert_eq!(
        f.fs.rmdir(transactions, OsStr::new("nope"))
            .unwrap_err()
            .errno,
        libc::ENOENT
    );
    assert_eq!(f.fs.opendir(file).unwrap_err().errno, libc::ENOTDIR);
    // The id is still there, unchanged.
    assert_eq!(transaction_row(&f, file)[4], "Empty");
}

#[test]
fn the_internal_topic_is_read_only_in_the_mount() {
    let f = fixture();
    f.fs.store().ensure_offsets_topic().unwrap();
    let dir = f.ino(ROOT_INO, "__consumer_offsets");
    assert!(listing(&f, ROOT_INO).contains(&"__consumer_offsets".to_string()));
    assert!(f
        .read_all(f.ino(dir, "status"))
        .starts_with("topic: __consumer_offsets\n"));
    let fh = f.open_log(dir);
    assert_eq!(f.fs.write(fh, b"x\n").unwrap_err().errno, libc::EPERM);
    f.fs.release(fh);
    assert!(
        f.errors().contains(
            " __consumer_offsets/log: Cannot append to internal topic __consumer_offsets\n"
        ),
        "{}",
        f.errors()
    );
    let config = f.ino(dir, "config");
    assert_eq!(
        f.fs.open(config, libc::O_WRONLY).unwrap_err().errno,
        libc::EPERM
    );
    let truncate = SetAttr {
        size: Some(0),
        ..SetAttr::default()
    };
    assert_eq!(
        f.fs.setattr(config, truncate).unwrap_err().errno,
        libc::EPERM
    );
    assert!(
        f.errors().contains(
            " __consumer_offsets/config: __consumer_offsets is an internal topic, read-only"
        ),
        "{}",
        f.errors()
    );
    assert!(f.read_all(config).contains("cleanup.policy=compact\n"));
    let start = f.ino(dir, "log_start_offset");
    let fh = f.fs.open(start, libc::O_WRONLY).unwrap().fh;
    assert_eq!(f.fs.write(fh, b"0\n").unwrap_err().errno, libc::EPERM);
    f.fs.release(fh);
    assert_eq!(
        f.fs.rmdir(ROOT_INO, OsStr::new("__consumer_offsets"))
            .unwrap_err()
            .errno,
        libc::EPERM
    );
    assert!(
        f.errors()
            .contains(" __consumer_offsets: Cannot delete internal topic"),
        "{}",
        f.errors()
    );
}

#[test]
fn a_kernel_that_cannot_map_direct_io_files_is_named_in_errors() {
    let f = fixture();
    f.fs.note_no_mmap("FUSE ABI 7.38");
    assert!(f.errors().ends_with(
        " .: warning: this kernel (FUSE ABI 7.38) lacks FUSE_DIRECT_IO_ALLOW_MMAP (Linux 6.6+): \
         mmap(2) of any file of the mount fails with ENODEV; read the files instead\n"
    ), "{}", f.errors());
}

/// Issue 24, item 3: `.kpfs/snapshot/TOPIC/log` is what `tar` and `rsync` can copy. Its
/// size is exactly what a read returns (the live `log`'s is the stream end, past the
/// gaps), and tar's stat, open, fstat, read, stat see one size and mtime while appends go
/// on; the grace window is the engine clock's.
#[test]
fn the_snapshot_of_a_topic_reads_as_long_as_its_size_through_tars_steps() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(crate::engine::ManualClock::new(1_764_430_000_000));
    let broker = BrokerConfig::load(None, &[]).unwrap();
    let engine = Engine::open(dir.path(), broker, clock.clone(), EngineOptions::default()).unwrap();
    let f = Fixture {
        fs: KpfsFs::new(Arc::new(engine), dir.path()),
        _dir: dir,
    };
    let topic = f.topic("t");
    let log = f.ino(topic, "log");
    let fh = f.open_log(topic);
    f.fs.write(fh, b"r0\nr1\nr2\nr3\nr4\n").unwrap();
    let start = f.ino(topic, "log_start_offset");
    let start_fh = f.fs.open(start, libc::O_WRONLY).unwrap().fh;
    f.fs.write(start_fh, b"2\n").unwrap();
    f.fs.release(start_fh);
    assert_eq!(
        f.fs.getattr(log).unwrap().size,
        15,
        "the live log keeps its size"
    );

    let control = f.ino(ROOT_INO, ".kpfs");
    let snapshot = f.ino(control, "snapshot");
    assert_eq!(listing(&f, snapshot), [".", "..", "t"]);
    let copy = f.ino(snapshot, "t");
    assert_eq!(listing(&f, copy), [".", "..", "log", "config"]);

    let copy_log = f.fs.lookup(copy, OsStr::new("log")).unwrap().attr;
    assert_eq!(copy_log.size, 9, "r2, r3, r4");
    let opened = f.fs.open(copy_log.ino, libc::O_RDONLY).unwrap().fh;
    f.fs.write(fh, b"r5\n").unwrap();
    clock.advance(crate::engine::CAPTURE_GRACE_MS);
    assert_eq!(
        f.fs.getattr(copy_log.ino).unwrap(),
        copy_log,
        "fstat after an append"
    );
    assert_eq!(f.fs.read(opened, 0, 1 << 20).unwrap(), b"r2\nr3\nr4\n");
    assert_eq!(f.fs.read(opened, 3, 3).unwrap(), b"r3\n");
    f.fs.release(opened);
    assert_eq!(
        f.fs.getattr(copy_log.ino).unwrap(),
        copy_log,
        "tar's last stat"
    );
    // Once the window after the close has passed, a look sees the records of then.
    clock.advance(crate::engine::CAPTURE_GRACE_MS);
    assert_eq!(f.read_all(copy_log.ino), "r2\nr3\nr4\nr5\n");
    f.fs.release(fh);

    let config = f.ino(copy, "config");
    assert_eq!(f.read_all(config), f.read_all(f.ino(topic, "config")));
    for file in [copy_log.ino, config] {
        assert_eq!(
            f.fs.open(file, libc::O_WRONLY).unwrap_err().errno,
            libc::EACCES
        );
    }
    expect_rejection_of(&f, ".kpfs/snapshot/t/log");
}

fn expect_rejection_of(f: &Fixture, path: &str) {
    let errors = f.errors();
    assert!(errors.contains(&format!(" {path}: ")), "{errors}");
}

impl Fixture {
    fn mkdir_in(&self, dir: u64, name: &str) -> crate::fs::FsResult<u64> {
        self.fs.mkdir(dir, OsStr::new(name)).map(|e| e.attr.ino)
    }

    fn append(&self, log: u64, data: &[u8]) {
        let fh = self
            .fs
            .open(log, libc::O_WRONLY | libc::O_APPEND)
            .unwrap()
            .fh;
        self.fs.write(fh, data).unwrap();
        self.fs.release(fh);
    }
}

/// `TOPIC/partitions/N`: one folder per partition, added by `mkdir` of the next number
/// only (Kafka's CreatePartitions), never removed.
#[test]
fn partitions_are_folders_added_by_mkdir_of_the_next_number() {
    let f = fixture();
    let topic = f.topic("t");
    assert!(listing(&f, topic).contains(&"partitions".to_string()));
    let partitions = f.ino(topic, "partitions");
    assert_eq!(listing(&f, partitions), [".", "..", "0"]);
    let zero = f.ino(partitions, "0");
    assert_eq!(
        listing(&f, zero),
        [".", "..", "log", "segments", "status", "log_start_offset"]
    );
    for (name, errno) in [
        ("0", libc::EEXIST),
        ("2", libc::EINVAL),
        ("01", libc::EINVAL),
        ("one", libc::EINVAL),
    ] {
        assert_eq!(
            f.mkdir_in(partitions, name).unwrap_err().errno,
            errno,
            "{name}"
        );
    }
    let errors = f.errors();
    assert!(
        errors.contains("t/partitions/2: partitions are added one at a time: t has 1 partitions, and mkdir t/partitions/1 adds the next"),
        "{errors}"
    );
    assert!(
        errors.contains("t/partitions/one: a partition's folder is its number"),
        "{errors}"
    );
    let one = f.mkdir_in(partitions, "1").unwrap();
    assert_eq!(f.ino(partitions, "1"), one);
    assert_eq!(listing(&f, partitions), [".", "..", "0", "1"]);
    assert_eq!(f.fs.store().topic("t").unwrap().partition_count(), 2);
    assert!(f
        .read_all(f.ino(topic, "status"))
        .contains("partitions: 2\n"));
    let removed = f.fs.rmdir(partitions, OsStr::new("1")).unwrap_err();
    assert_eq!(removed.errno, libc::EPERM);
    assert!(
        f.errors()
            .contains("t/partitions/1: partitions are never removed, as in Kafka"),
        "{}",
        f.errors()
    );
    enoent(f.fs.lookup(partitions, OsStr::new("2")), "partition 2");
    // The internal topic's partitions are the group coordinator's.
    let internal =
        f.fs.store()
            .topic(crate::engine::format::OFFSETS_TOPIC)
            .map(|t| t.partition_count());
    if let Some(count) = internal {
        let dir = f.ino(ROOT_INO, crate::engine::format::OFFSETS_TOPIC);
        let parts = f.ino(dir, "partitions");
        let refused = f.mkdir_in(parts, &count.to_string()).unwrap_err();
        assert_eq!(refused.errno, libc::EPERM, "{}", refused.message);
    }
}

/// `TOPIC/partitions/N/log` is partition N's stream alone, and appends to it go to N;
/// `TOPIC/log` reads every partition's records once, in the order they were appended,
/// and sends a keyed record to its key's partition.
#[test]
fn a_partitions_log_is_its_own_stream_and_the_topics_log_is_all_of_them() {
    let f = fixture();
    let topic = f.topic("t");
    let partitions = f.ino(topic, "partitions");
    f.mkdir_in(partitions, "1").unwrap();
    let log_of = |n: &str| f.ino(f.ino(partitions, n), "log");
    f.append(log_of("1"), b"a\n");
    f.append(log_of("0"), b"b\n");
    f.append(log_of("1"), b"c\nd\n");
    assert_eq!(f.read_all(log_of("1")), "a\nc\nd\n");
    assert_eq!(f.read_all(log_of("0")), "b\n");
    let log = f.ino(topic, "log");
    assert_eq!(f.read_all(log), "a\nb\nc\nd\n");
    assert_eq!(f.fs.getattr(log).unwrap().size, 8);
    assert_eq!(f.fs.getattr(log_of("1")).unwrap().size, 6);
    let status_of = |n: &str| f.read_all(f.ino(f.ino(partitions, n), "status"));
    assert!(
        status_of("1").contains("log_end_offset: 3\n"),
        "{}",
        status_of("1")
    );
    assert!(
        status_of("0").contains("log_end_offset: 1\n"),
        "{}",
        status_of("0")
    );

    // A keyed line goes where Kafka's default partitioner sends its key.
    f.set_config(topic, "parse.key=true\nkey.separator=:\n");
    let key_partition = crate::lines::partitioner::partition_for_key(b"alice", 2);
    f.append(log, b"alice:v1\n");
    let expected = if key_partition == 0 {
        "b\nalice:v1\n"
    } else {
        "a\nc\nd\nalice:v1\n"
    };
    assert_eq!(f.read_all(log_of(&key_partition.to_string())), expected);
    assert_eq!(f.read_all(log), "a\nb\nc\nd\nalice:v1\n");

    // The topic folder's log_start_offset is partition 0's: with several partitions an
    // offset must name its partition.
    let topic_start = f.ino(topic, "log_start_offset");
    let fh = f.fs.open(topic_start, libc::O_WRONLY).unwrap().fh;
    assert_eq!(f.fs.write(fh, b"1\n").unwrap_err().errno, libc::EINVAL);
    f.fs.release(fh);
    assert!(
        f.errors().contains(
            "t/log_start_offset: t has 2 partitions: write the offset to t/partitions/N/log_start_offset of partition N"
        ),
        "{}",
        f.errors()
    );
    let start_of_one = f.ino(f.ino(partitions, "1"), "log_start_offset");
    f.append(start_of_one, b"2\n");
    assert_eq!(f.read_all(start_of_one), "2\n");
    assert_eq!(f.read_all(topic_start), "0\n");
    assert!(f.read_all(log_of("1")).starts_with("d\n"));
    let segments = f.ino(f.ino(partitions, "1"), "segments");
    assert!(listing(&f, segments).contains(&"00000000000000000000.log".to_string()));
    // Partition 0's segment files are one file under two names.
    let first = "00000000000000000000.log";
    let nested = f.ino(f.ino(f.ino(partitions, "0"), "segments"), first);
    assert_eq!(nested, f.ino(f.ino(topic, "segments"), first));
    assert_eq!(f.fs.getattr(nested).unwrap().nlink, 2);
    assert_eq!(f.fs.getattr(f.ino(segments, first)).unwrap().nlink, 1);
}

/// The snapshot of a topic of several partitions holds each partition's records in
/// turn, and its size is what a read returns.
#[test]
fn the_snapshot_of_a_topic_of_several_partitions_holds_each_partition_in_turn() {
    let f = fixture();
    let topic = f.topic("t");
    let partitions = f.ino(topic, "partitions");
    f.mkdir_in(partitions, "1").unwrap();
    f.mkdir_in(partitions, "2").unwrap();
    let log_of = |n: &str| f.ino(f.ino(partitions, n), "log");
    f.append(log_of("2"), b"c1\n");
    f.append(log_of("0"), b"a1\na2\n");
    f.append(log_of("2"), b"c2\n");
    let copy = f.ino(f.ino(f.ino(ROOT_INO, ".kpfs"), "snapshot"), "t");
    let copy_log = f.ino(copy, "log");
    assert_eq!(f.fs.getattr(copy_log).unwrap().size, 12);
    assert_eq!(f.read_all(copy_log), "a1\na2\nc1\nc2\n");
    let fh = f.fs.open(copy_log, libc::O_RDONLY).unwrap().fh;
    assert_eq!(
        f.fs.read(fh, 4, 5).unwrap(),
        b"2\nc1\n",
        "a read across partitions"
    );
    f.fs.release(fh);
}
