//! Where a session's history is kept and found once the session is not live: the journal
//! directory of each principal (the process's own user in the journal directory itself, any
//! other principal in a 0700 directory of its own), and which journal a name reads from.

use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;

use super::scope::key::{Owner, SessionKey, Slot};
use super::{PastHistory, Registry, lock};

impl Registry {
    /// Where the history of `key`'s session is read from when it is not live: a connection's
    /// own ended `default` leaves its journal to that connection only; a named session's is
    /// the newest public journal of that name.
    pub fn past_history(&self, key: &SessionKey) -> PastHistory {
        match key.slot() {
            Slot::Named(owner, name) => match self.journal_dir_of(owner) {
                Some(dir) => PastHistory::LatestOf {
                    dir,
                    name: name.clone(),
                },
                None => PastHistory::Nothing,
            },
            Slot::Default(owner) => lock(&self.table)
                .ended_journal(*owner)
                .map_or(PastHistory::Nothing, PastHistory::Journal),
        }
    }

    /// Where `owner`'s sessions journal their history: the journal directory for the
    /// process's own user, else a 0700 directory of that principal's in it (`principals/`
    /// and a digest of its id), so a principal's past history is found by its name only by
    /// that principal. `None` when journals are off or the directory cannot be made.
    pub fn journal_dir_of(&self, owner: &Owner) -> Option<PathBuf> {
        let base = self.journal_dir.as_ref()?;
        if owner.is_process() {
            return Some(base.clone());
        }
        use sha2::Digest;
        let digest = hex::encode(&sha2::Sha256::digest(owner.as_str().as_bytes())[..12]);
        let dir = base.join("principals").join(digest);
        let made = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir);
        match made {
            Ok(()) => Some(dir),
            Err(e) => {
                tracing::warn!(principal = %owner, "cannot make the principal's journal directory {}: {e}", dir.display());
                None
            }
        }
    }
}
