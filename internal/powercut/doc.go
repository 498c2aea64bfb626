// Package powercut is a test-only FUSE filesystem that simulates a power
// cut. A test mounts it over an empty directory, backed by a real one, and
// runs code (its own or a child process such as mother) on the mount. The
// filesystem passes everything through to the backing directory, so the
// code sees an ordinary filesystem, and meanwhile keeps apart what has
// been made durable: Cut throws away everything that was not, the way
// ext4 (data=ordered) may after a power loss, and leaves in the backing
// directory exactly the durable state, to be remounted or used directly.
//
// The model (docs/testing.md, "Power cuts: what the simulator models"):
//
//   - A regular file's data and size are durable as they were at its last
//     fsync(2) or fdatasync(2) (at mount: as found; since its creation:
//     empty). Later writes and truncations are lost; with Options.Unsynced,
//     a random prefix of them survives (the next one maybe torn), or a
//     random subset.
//   - A directory's entries are durable as they were at the directory's
//     last fsync. An entry added (create, mkdir, mknod, symlink, link,
//     rename's new name) or removed (unlink, rmdir, rename's old name)
//     since then is reverted: a created file vanishes with its data even
//     if the file was fsynced; an unsynced rename is undone; an unsynced
//     rename over a file brings the old file back, with its own durable
//     content.
//   - An fsync of a file does not make its name durable, nor does an fsync
//     of a directory make the directory's own name durable: only an fsync
//     of the parent does (POSIX; Options.SyncPersistsPath models ext4,
//     where in practice it does).
//   - A directory has one durable place: when two directories' durable
//     entries name it (a rename across directories, each fsynced at a
//     different time), the most recently recorded wins. A directory whose
//     durable place is inside itself (a cycle) is not reachable and lost.
//
// Crash points (CrashAt) freeze the filesystem at the N-th fsync (before
// or after it takes effect) or just before the N-th changing operation;
// Freeze does it at once. A frozen filesystem makes nothing more durable
// and fails (or holds, Options.BlockWhenFrozen) every operation, so the
// test can SIGKILL the process and call Cut. Fault injects EIO or any
// errno into writes or fsyncs (by path), and LimitSpace gives ENOSPC once
// a byte budget is spent.
//
// Mounting needs /dev/fuse and root (mount(2) directly) or fusermount3.
// MountT mounts for a test, unmounts when it ends, and calls
// testenv.Unavailable when FUSE is not available.
package powercut
