//! `KpfsFs` over an in-memory store ([`MockStore`]): what the adapter itself makes of a
//! backend's answers and errors, without the engine's rules in the way.

use std::ffi::OsStr;
use std::io;
use std::sync::Arc;

use crate::engine::EngineError;
use crate::fs::inode::ROOT_INO;
use crate::fs::KpfsFs;
use crate::store::mock::MockStore;
use crate::store::Store;

fn mount() -> KpfsFs<MockStore> {
    KpfsFs::new(Arc::new(MockStore::default()), &std::env::temp_dir())
}

fn topic(fs: &KpfsFs<MockStore>, name: &str) -> u64 {
    fs.mkdir(ROOT_INO, OsStr::new(name)).unwrap().attr.ino
}

fn lookup(fs: &KpfsFs<MockStore>, parent: u64, name: &str) -> u64 {
    fs.lookup(parent, OsStr::new(name)).unwrap().attr.ino
}

fn listing(fs: &KpfsFs<MockStore>, dir: u64) -> Vec<String> {
    let fh = fs.opendir(dir).unwrap().fh;
    let names = fs.readdir(fh, 2).unwrap().into_iter().map(|e| e.name);
    let names = names.collect();
    fs.releasedir(fh);
    names
}

fn no_space() -> EngineError {
    EngineError::io("append", io::Error::from_raw_os_error(libc::ENOSPC))
}

fn unreadable() -> EngineError {
    EngineError::io("read", io::Error::other("the backend went away"))
}

#[test]
fn lines_reach_the_store_whole_whatever_the_writes() {
    let fs = mount();
    let log = lookup(&fs, topic(&fs, "t"), "log");
    let fh = fs.open(log, libc::O_WRONLY).unwrap().fh;
    for piece in ["ab", "c\nd", "e\nf\ng"] {
        fs.write(fh, piece.as_bytes()).unwrap();
    }
    assert_eq!(fs.store().appends("t"), ["abc\n", "de\nf\n"]);
    fs.flush(fh, 0).unwrap();
    fs.release(fh);
    assert_eq!(fs.store().appends("t"), ["abc\n", "de\nf\n", "g"]);
    assert_eq!(fs.getattr(log).unwrap().size, 10);
}

#[test]
fn an_append_the_store_refuses_gives_its_errno_and_reason_and_stores_nothing() {
    let fs = mount();
    let log = lookup(&fs, topic(&fs, "t"), "log");
    let fh = fs.open(log, libc::O_WRONLY).unwrap().fh;
    fs.write(fh, b"a\n").unwrap();

    *fs.store().faults.append.lock() = Some(no_space);
    let refused = fs.write(fh, b"b\nc").unwrap_err();
    assert_eq!(refused.errno, libc::ENOSPC);
    let errors = fs.store().rejections_text();
    assert!(errors.starts_with("t/log: "), "{errors}");
    assert!(errors.contains(&io::Error::from_raw_os_error(libc::ENOSPC).to_string()));

    // The store takes appends again, but the rest of the refused line is refused too.
    *fs.store().faults.append.lock() = None;
    let rest = fs.write(fh, b"c continued\n").unwrap_err();
    assert_eq!(rest.errno, libc::ENOSPC);
    fs.write(fh, b"d\n").unwrap();
    fs.release(fh);
    assert_eq!(fs.store().appends("t"), ["a\n", "d\n"]);
}

#[test]
fn a_read_the_store_fails_is_eio_with_its_reason() {
    let fs = mount();
    let log = lookup(&fs, topic(&fs, "t"), "log");
    let fh = fs.open(log, libc::O_RDWR).unwrap().fh;
    fs.write(fh, b"a\n").unwrap();
    assert_eq!(fs.read(fh, 0, 64).unwrap(), b"a\n");

    *fs.store().faults.read.lock() = Some(unreadable);
    let failed = fs.read(fh, 0, 64).unwrap_err();
    assert_eq!(failed.errno, libc::EIO);
    assert!(fs
        .store()
        .rejections_text()
        .contains("the backend went away"));

    *fs.store().faults.read.lock() = None;
    assert_eq!(fs.read(fh, 1, 64).unwrap(), b"\n");
}

#[test]
fn a_store_without_segment_files_shows_no_segments_folder() {
    let fs = mount();
    let dir = topic(&fs, "t");
    let files = listing(&fs, dir);
    assert!(files.contains(&"log".to_string()), "{files:?}");
    assert!(!files.contains(&"segments".to_string()), "{files:?}");
    let partition = lookup(&fs, lookup(&fs, dir, "partitions"), "0");
    let files = listing(&fs, partition);
    assert!(files.contains(&"status".to_string()), "{files:?}");
    assert!(!files.contains(&"segments".to_string()), "{files:?}");
    for folder in [dir, partition] {
        let missing = fs.lookup(folder, OsStr::new("segments")).unwrap_err();
        assert_eq!(missing.errno, libc::ENOENT);
    }
}
