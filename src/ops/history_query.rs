//! Which history entries `get_history` returns: a Python slice (`start`/`end`), the latest
//! `n`, or the one entry of a run id. The three are exclusive; mixing them is
//! `INVALID_ARGUMENT`. Works on live sessions and on journals of past ones alike.

use super::HistorySource;
use crate::registry::Registry;
use crate::session::SessionError;

/// A choice of history entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HistorySelect {
    /// Entries `[start, end)`, Python slice semantics.
    Slice {
        start: Option<i64>,
        end: Option<i64>,
    },
    /// The last `n` entries (n ≥ 1).
    Latest(usize),
    /// The entry recorded for this run.
    Run(String),
}

impl HistorySelect {
    /// The selection the parameters ask for.
    /// Errors: `INVALID_ARGUMENT` when `run_id` or `latest_n` is mixed with another selector,
    /// or `latest_n` is 0.
    pub fn from_params(
        start: Option<i64>,
        end: Option<i64>,
        run_id: Option<String>,
        latest_n: Option<usize>,
    ) -> Result<HistorySelect, SessionError> {
        let slice = start.is_some() || end.is_some();
        match (run_id, latest_n) {
            (Some(_), Some(_)) => Err(SessionError::InvalidArgument(
                "Give run_id or latest_n, not both.".into(),
            )),
            (Some(_), None) | (None, Some(_)) if slice => Err(SessionError::InvalidArgument(
                "run_id and latest_n cannot be combined with start/end: use one way of choosing entries.".into(),
            )),
            (Some(run), None) => Ok(HistorySelect::Run(run)),
            (None, Some(0)) => Err(SessionError::InvalidArgument(
                "latest_n must be at least 1.".into(),
            )),
            (None, Some(n)) => Ok(HistorySelect::Latest(n)),
            (None, None) => Ok(HistorySelect::Slice { start, end }),
        }
    }
}

impl Registry {
    /// The entries `select` chooses from session `session_id`'s history (live, else journal).
    /// Errors: `SESSION_NOT_FOUND`, `IO_ERROR`; `EXECUTION_NOT_FOUND` for a run id that is not
    /// in the history.
    pub async fn history_select(
        &self,
        session_id: &str,
        select: &HistorySelect,
    ) -> Result<HistorySource, SessionError> {
        match select {
            HistorySelect::Slice { start, end } => {
                self.history_source(session_id, *start, *end).await
            }
            HistorySelect::Latest(n) => {
                let start = i64::try_from(*n).map_or(i64::MIN, |n| -n);
                self.history_source(session_id, Some(start), None).await
            }
            HistorySelect::Run(run) => {
                let mut src = self.history_source(session_id, None, None).await?;
                src.entries.retain(|(_, e)| e.run_id == *run);
                if src.entries.is_empty() {
                    return Err(SessionError::RunNotInHistory {
                        run: run.clone(),
                        session: session_id.to_string(),
                        total: src.total,
                    });
                }
                Ok(src)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_id_and_latest_n_exclude_the_slice_and_each_other() {
        let bad = [
            (Some(0), None, Some("r".to_string()), None),
            (None, Some(2), None, Some(3)),
            (None, None, Some("r".to_string()), Some(1)),
            (None, None, None, Some(0)),
        ];
        for (start, end, run, n) in bad {
            let e = HistorySelect::from_params(start, end, run, n).unwrap_err();
            assert_eq!(e.code(), crate::session::ErrorCode::InvalidArgument);
        }
        assert_eq!(
            HistorySelect::from_params(None, None, None, Some(2)).unwrap(),
            HistorySelect::Latest(2)
        );
        assert_eq!(
            HistorySelect::from_params(Some(1), None, None, None).unwrap(),
            HistorySelect::Slice {
                start: Some(1),
                end: None
            }
        );
    }
}
