//! Tests of reading and writing user-named files: every odd path fails at once.
use std::fs;
use std::time::{Duration, Instant};

use nix::sys::stat::Mode;
use tokio::time::timeout;

use super::*;

/// Any of these calls must answer within this. They answer in microseconds: the bound only
/// tells an answer from a hang, with room for a loaded machine.
const PROMPTLY: Duration = Duration::from_secs(10);

/// Run `fut` on a runtime of its own, failing if it takes longer than [`PROMPTLY`]. The
/// runtime is shut down without waiting for its blocking pool, so a system call that hangs
/// fails the test instead of hanging it.
fn promptly<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let got = rt.block_on(async { timeout(PROMPTLY, fut).await });
    rt.shutdown_background();
    got.unwrap_or_else(|_| panic!("{what} did not answer within {PROMPTLY:?}"))
}

fn read(path: &Path, cap: usize) -> Result<Vec<u8>, FileError> {
    promptly(
        &format!("read_capped({})", path.display()),
        read_capped(path, cap),
    )
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), FileError> {
    promptly(
        &format!("write_file({})", path.display()),
        write_file(path, bytes.to_vec(), FileMode::Keep),
    )
}

fn fifo_in(dir: &Path) -> PathBuf {
    let path = dir.join("pipe");
    nix::unistd::mkfifo(&path, Mode::from_bits_truncate(0o600)).unwrap();
    path
}

#[test]
fn dev_zero_is_refused_as_a_character_device() {
    let err = read(Path::new("/dev/zero"), 1 << 20).unwrap_err();
    assert!(
        matches!(
            err,
            FileError::NotRegular {
                kind: FileKind::CharDevice,
                access: Access::Read,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.kind(), FileErrorKind::Io);
    assert_eq!(
        err.to_string(),
        "/dev/zero is a character device, not a regular file; only regular files can be read"
    );
}

#[test]
fn fifo_without_a_writer_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = fifo_in(dir.path());
    let err = read(&fifo, 1024).unwrap_err();
    assert!(
        matches!(
            err,
            FileError::NotRegular {
                kind: FileKind::Fifo,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("is a FIFO (named pipe)"), "{err}");
}

#[test]
fn dev_stdin_answers_at_once_and_is_refused_unless_it_is_a_regular_file() {
    let path = Path::new("/dev/stdin");
    let got = read(path, 1024);
    match std::fs::metadata(path) {
        // stdin redirected from a plain file: reading it is allowed.
        Ok(m) if m.is_file() => {}
        Ok(_) => assert!(matches!(got, Err(FileError::NotRegular { .. })), "{got:?}"),
        Err(_) => assert!(
            matches!(got, Err(FileError::NotFound { .. } | FileError::Io { .. })),
            "{got:?}"
        ),
    }
}

#[test]
fn unix_socket_is_refused_as_a_socket() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sock");
    let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let err = read(&path, 1024).unwrap_err();
    assert!(
        matches!(
            err,
            FileError::NotRegular {
                kind: FileKind::Socket,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn sparse_64_gib_file_is_too_large_before_any_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sparse.bin");
    fs::File::create(&path).unwrap().set_len(64 << 30).unwrap();
    let started = Instant::now();
    let err = read(&path, 1 << 20).unwrap_err();
    assert!(
        matches!(
            err,
            FileError::TooLarge {
                size: 68719476736,
                limit: 1048576,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.kind(), FileErrorKind::LimitExceeded);
    // Reading 1 MiB + 1 of zeros would be quick too; 64 GiB would take far longer than this
    // bound, which only proves that it returns.
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn directory_is_refused_with_a_file_path_suggestion() {
    let dir = tempfile::tempdir().unwrap();
    let err = read(dir.path(), 1024).unwrap_err();
    assert!(matches!(err, FileError::IsDirectory { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("is a directory"), "{msg}");
    assert!(
        msg.contains(&format!("{}/<file name>", dir.path().display())),
        "{msg}"
    );
}

#[test]
fn missing_file_is_not_found_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope.py");
    let err = read(&path, 1024).unwrap_err();
    assert!(matches!(err, FileError::NotFound { .. }), "{err:?}");
    assert_eq!(err.path(), path);
    assert!(err.to_string().contains("does not exist"), "{err}");
}

#[test]
fn regular_file_is_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.py");
    fs::write(&path, b"print('hi')\n").unwrap();
    assert_eq!(read(&path, 1024).unwrap(), b"print('hi')\n");
}

#[test]
fn file_exactly_at_the_cap_is_read_and_one_byte_over_is_too_large() {
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path().join("at");
    let over = dir.path().join("over");
    fs::write(&at, vec![b'x'; 100]).unwrap();
    fs::write(&over, vec![b'x'; 101]).unwrap();
    assert_eq!(read(&at, 100).unwrap().len(), 100);
    let err = read(&over, 100).unwrap_err();
    assert!(
        matches!(
            err,
            FileError::TooLarge {
                size: 101,
                limit: 100,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn file_that_reports_size_zero_is_still_capped() {
    // procfs files report size 0 whatever they hold; this one holds far more than 16 bytes.
    let err = read(Path::new("/proc/self/maps"), 16).unwrap_err();
    assert!(
        matches!(
            err,
            FileError::TooLarge {
                size: 17..,
                limit: 16,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn write_creates_parent_directories_and_replaces_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a/b/out.txt");
    write(&path, b"one").unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"one");
    write(&path, b"two").unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"two");
    let names: Vec<_> = fs::read_dir(dir.path().join("a/b"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["out.txt"], "no temp file is left behind");
}

#[test]
fn write_keeps_an_existing_files_permission_bits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("script.sh");
    fs::write(&path, b"old").unwrap();
    fs::set_permissions(&path, Permissions::from_mode(0o751)).unwrap();
    write(&path, b"new").unwrap();
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o751);
}

#[test]
fn a_private_write_is_for_its_owner_only_new_or_replacing_a_readable_file() {
    let dir = tempfile::tempdir().unwrap();
    let new = dir.path().join("new.json");
    let old = dir.path().join("old.json");
    fs::write(&old, b"old").unwrap();
    fs::set_permissions(&old, Permissions::from_mode(0o644)).unwrap();
    for path in [&new, &old] {
        promptly(
            "write_file(private)",
            write_file(path, b"secret".to_vec(), FileMode::Private),
        )
        .unwrap();
        let mode = fs::metadata(path).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o600, "{}", path.display());
        assert_eq!(fs::read(path).unwrap(), b"secret");
    }
}

#[test]
fn write_through_a_symlink_replaces_its_target_and_keeps_the_link() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.txt");
    let link = dir.path().join("link.txt");
    fs::write(&real, b"old").unwrap();
    std::os::unix::fs::symlink(&real, &link).unwrap();
    write(&link, b"new").unwrap();
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(fs::read(&real).unwrap(), b"new");
}

#[test]
fn fifo_write_target_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = fifo_in(dir.path());
    let err = write(&fifo, b"data").unwrap_err();
    assert!(
        matches!(
            err,
            FileError::NotRegular {
                kind: FileKind::Fifo,
                access: Access::Write,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("only regular files can be written")
    );
    assert!(fs::metadata(&fifo).unwrap().file_type().is_fifo());
}

#[test]
fn device_write_target_is_refused() {
    let err = write(Path::new("/dev/null"), b"x").unwrap_err();
    assert!(
        matches!(
            err,
            FileError::NotRegular {
                kind: FileKind::CharDevice,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn directory_write_target_is_refused_with_a_file_path_suggestion() {
    let dir = tempfile::tempdir().unwrap();
    for path in [dir.path().to_path_buf(), dir.path().join("new-dir/")] {
        let err = write(&path, b"x").unwrap_err();
        assert!(matches!(err, FileError::IsDirectory { .. }), "{err:?}");
        assert!(err.to_string().contains("<file name>"), "{err}");
    }
    assert!(!dir.path().join("new-dir").exists());
}

#[test]
fn write_under_a_regular_file_is_an_io_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain");
    fs::write(&file, b"x").unwrap();
    let path = file.join("out.txt");
    let err = write(&path, b"x").unwrap_err();
    assert!(matches!(err, FileError::Io { .. }), "{err:?}");
    assert!(
        err.to_string()
            .starts_with(&format!("cannot write {}", path.display())),
        "{err}"
    );
}
