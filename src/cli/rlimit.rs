//! The process's open-file limit, raised by the daemon before it opens the engine. It is
//! a property of the process, not of the storage engine: the daemon (and the benchmarks
//! that stand in for it) set it; the engine never does.

use std::io;

/// Raises this process's open-file limit as far as it may go: the hard limit to
/// `fs.nr_open` when privileged (root has CAP_SYS_RESOURCE), the soft limit to the hard
/// one. A mount holds one descriptor per topic (its active segment's `.log`; sealed
/// segments open theirs per use, ARCHITECTURE.md "Descriptors and mappings") and one per
/// open `segments/` file, so about a thousand topics already pass the usual soft limit of
/// 1,024. Kafka, which keeps every segment's `.log` open, has its operators raise
/// `ulimit -n` for the same reason. Returns the soft limit now in force.
pub fn raise_open_file_limit() -> io::Result<u64> {
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given, which lives on this stack.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut current) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|text| text.trim().parse::<libc::rlim_t>().ok())
        .unwrap_or(current.rlim_max)
        .max(current.rlim_max);
    for limit in [nr_open, current.rlim_max] {
        let wanted = libc::rlimit {
            rlim_cur: limit,
            rlim_max: limit,
        };
        // SAFETY: setrlimit only reads the struct it is given; failing (unprivileged, for
        // a hard limit above the current one) changes nothing.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &wanted) } == 0 {
            return Ok(limit);
        }
    }
    Err(io::Error::last_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_reaches_at_least_the_hard_limit() {
        let mut before = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit only writes the struct it is given, which lives on this stack.
        let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut before) };
        assert_eq!(rc, 0);
        let soft = raise_open_file_limit().unwrap();
        assert!(
            soft >= before.rlim_max,
            "{soft} below the hard limit {}",
            before.rlim_max
        );
    }
}
