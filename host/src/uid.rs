//! Who this process runs as: the owner every private file and socket the
//! host makes must have, and the uid a peer on its socket must share.

/// The uid of this process.
pub(crate) fn current_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    // /proc/self is owned by the effective uid; this avoids an unsafe libc call.
    std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(u32::MAX)
}
