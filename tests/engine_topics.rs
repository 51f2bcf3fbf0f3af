//! The topic registry through the engine API: creating and deleting topics, and what
//! their names may be.

mod common;

use std::fs;

use common::*;

/// Names in the data directory, sorted.
fn data_dir_names(f: &Fixture) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(f.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// `NAME-0.<ms>-delete` is longer than a file name may be for topics of 233-249
/// characters; Kafka cuts the topic part of it. A deleted topic never comes back: not in
/// the mount, not from a new topic of the same name, not after a reopen.
#[test]
fn topics_with_the_longest_names_delete_for_good() {
    let mut f = Fixture::new();
    let names: Vec<String> = [232, 233, 240, 249]
        .iter()
        .map(|&len| "t".repeat(len))
        .collect();
    for name in &names {
        f.topic(name).append_lines(b"old\n").unwrap();
        f.engine().delete_topic(name).unwrap();
        assert!(
            f.engine().topic(name).is_none(),
            "{} characters",
            name.len()
        );
        let recreated = f.topic(name);
        assert_eq!(cat_string(&recreated), "", "{} characters", name.len());
        f.engine().delete_topic(name).unwrap();
    }
    let left: Vec<String> = data_dir_names(&f)
        .into_iter()
        .filter(|n| n.starts_with('t'))
        .collect();
    assert_eq!(left, Vec::<String>::new(), "directories left behind");
    f.reopen();
    assert_eq!(f.engine().topic_names(), Vec::<String>::new());
}

/// A delete that fails leaves the topic as it was: listed, readable, writable, and still
/// there after a reopen.
#[test]
fn a_failed_delete_leaves_the_topic_as_it_was() {
    let mut f = Fixture::new();
    let t = f.topic("orders");
    t.append_lines(b"a\n").unwrap();
    // The directory the topic would be renamed to exists and is not empty, so the rename
    // fails (the clock is manual: the name is known).
    let blocker = f.dir.path().join(format!("orders-0.{T0}-delete"));
    fs::create_dir(&blocker).unwrap();
    fs::write(blocker.join("x"), b"x").unwrap();
    let err = f.engine().delete_topic("orders").unwrap_err();
    assert!(err.to_string().contains("rename"), "{err}");
    assert_eq!(f.engine().topic_names(), vec!["orders".to_string()]);
    let t = f.topic("orders");
    assert_eq!(cat_string(&t), "a\n");
    t.append_lines(b"b\n").unwrap();
    assert_eq!(cat_string(&t), "a\nb\n");
    f.reopen();
    assert_eq!(cat_string(&f.topic("orders")), "a\nb\n");
    assert!(!blocker.exists(), "an open removes -delete directories");
}

/// A topic may itself be named like a partition; errors name it, not a shorter one.
#[test]
fn errors_name_a_topic_named_like_a_partition() {
    let f = Fixture::new();
    for name in ["x-0", "x-0-0"] {
        let t = f.topic(name);
        f.engine().delete_topic(name).unwrap();
        let err = t.append_lines(b"late\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("This server does not host this topic-partition: {name}-0")
        );
    }
}

/// Kafka refuses a name that differs from an existing topic's only in '.' versus '_'
/// (their metric names would be the same); the existing topic is untouched.
#[test]
fn names_that_collide_in_metric_names_are_refused() {
    let f = Fixture::new();
    f.topic("my.topic").append_lines(b"a\n").unwrap();
    let err = f.engine().create_topic("my_topic", 1).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Topic 'my_topic' collides with existing topic: my.topic"
    );
    f.topic("woo.bar.foo");
    let err = f.engine().create_topic("woo.bar_foo", 1).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Topic 'woo.bar_foo' collides with existing topic: woo.bar.foo"
    );
    assert_eq!(f.engine().topic_names(), vec!["my.topic", "woo.bar.foo"]);
    assert!(!f.dir.path().join("my_topic-0").exists());
    // Other differences, and the name once the other topic is gone, are fine.
    f.topic("my-topic");
    f.engine().delete_topic("my.topic").unwrap();
    f.topic("my_topic");
}

/// A topic's kpfs folder (its config and stream indexes) goes with the topic: a topic
/// created later under the same name starts from the defaults, and a folder a crash left
/// without its partition directory is removed at the next open.
#[test]
fn a_deleted_topic_takes_its_kpfs_folder_along() {
    let mut f = Fixture::new();
    let t = f.topic("orders");
    set(&t, "retention.ms=1234");
    t.append_lines(b"a\n").unwrap();
    drop(t);
    let folder = f.dir.path().join("kpfs-topics").join("orders-0");
    assert!(folder.join("topic.properties").is_file());
    f.engine().delete_topic("orders").unwrap();
    assert!(!folder.exists(), "the kpfs folder stays behind");
    let again = f.topic("orders");
    assert!(
        !again.config_text().contains("\nretention.ms=1234"),
        "{}",
        again.config_text()
    );
    assert_eq!(cat_string(&again), "");
    drop(again);
    f.engine().delete_topic("orders").unwrap();

    // A crash between the partition directory's rename and the folder's.
    fs::create_dir_all(&folder).unwrap();
    fs::write(folder.join("topic.properties"), "retention.ms=1234\n").unwrap();
    f.reopen();
    assert!(!folder.exists(), "an orphaned kpfs folder stays behind");
    let fresh = f.topic("orders");
    assert!(!fresh.config_text().contains("\nretention.ms=1234"));
}

/// The mount learns of every deletion (DeleteTopics through the listener too) from the
/// engine, after the topic is gone, to drop what the kernel cached of its folder; a
/// deletion that fails tells nobody.
#[test]
fn deletions_are_told_to_the_hook_once_done() {
    let f = Fixture::new();
    let told = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = told.clone();
    let engine = std::sync::Arc::new(open(&f.dir.path().join("other"), &f.clock));
    let registry = std::sync::Arc::downgrade(&engine);
    engine.on_topic_deletion(Some(Box::new(move |name: &str| {
        let engine = registry.upgrade().unwrap();
        seen.lock()
            .unwrap()
            .push((name.to_string(), engine.topic(name).is_some()));
    })));
    engine.create_topic("a", 1).unwrap();
    engine.create_topic("b", 1).unwrap();
    engine.delete_topic("b").unwrap();
    assert!(engine.delete_topic("b").is_err());
    assert_eq!(*told.lock().unwrap(), [("b".to_string(), false)]);
    engine.on_topic_deletion(None);
    engine.delete_topic("a").unwrap();
    assert_eq!(told.lock().unwrap().len(), 1);
}
