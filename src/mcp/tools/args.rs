//! Parameter types more than one tool takes: a duration in seconds ([`Seconds`], parsed
//! once with the arguments) and a closed choice checked when its tool reads it
//! ([`Choice`]). Closed choices checked with the arguments are plain serde enums, declared
//! beside their tool.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{DeserializeOwned, Error as _, IntoDeserializer};
use serde::{Deserialize, Deserializer};

use crate::config::Limits;

/// The largest number of seconds a parameter takes (about 116 days).
const MAX_SECONDS: f64 = 1e7;

/// The name of a parameter, for the message that refuses its value.
pub(crate) trait Named {
    const NAME: &'static str;
}

macro_rules! named {
    ($($(#[$doc:meta])* $ty:ident = $name:literal;)*) => {$(
        $(#[$doc])*
        #[derive(Debug)]
        pub(crate) enum $ty {}
        impl Named for $ty {
            const NAME: &'static str = $name;
        }
    )*};
}

named! {
    /// `timeout_s`: a run-time limit (0: none).
    TimeoutS = "timeout_s";
    /// `queue_timeout_s`: how long a run may wait for another client's cell (0: none).
    QueueTimeoutS = "queue_timeout_s";
    /// `wait_s`: how long a call waits for a run.
    WaitS = "wait_s";
    /// `startup_timeout_s`: how long a kernel may take to become ready.
    StartupTimeoutS = "startup_timeout_s";
    /// `expires_after_s`: idle time until a session is shut down (0: never).
    ExpiresAfterS = "expires_after_s";
}

/// A number of seconds, given as parameter `P::NAME`: a JSON number from 0 to 10 000 000,
/// turned into a [`Duration`] as the arguments are parsed. Any other value refuses the call
/// with `INVALID_ARGUMENT` ("`timeout_s` must be a number of seconds between 0 and
/// 10000000, not -1.0."), before the tool runs. The schema is `{"type": "number"}`.
pub(crate) struct Seconds<P>(Duration, PhantomData<fn() -> P>);

impl<P> Seconds<P> {
    /// The duration given.
    pub(crate) fn get(&self) -> Duration {
        self.0
    }

    /// The duration as a limit: `None` for 0, which means "none" (`timeout_s`,
    /// `expires_after_s`).
    pub(crate) fn limit(&self) -> Option<Duration> {
        (!self.0.is_zero()).then_some(self.0)
    }
}

impl<P: Named> fmt::Debug for Seconds<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={:?}", P::NAME, self.0)
    }
}

impl<'de, P: Named> Deserialize<'de> for Seconds<P> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = f64::deserialize(d)?;
        if s.is_finite() && (0.0..=MAX_SECONDS).contains(&s) {
            Ok(Seconds(Duration::from_secs_f64(s), PhantomData))
        } else {
            Err(D::Error::custom(format!(
                "{} must be a number of seconds between 0 and 10000000, not {s:?}.",
                P::NAME
            )))
        }
    }
}

impl<P> JsonSchema for Seconds<P> {
    fn schema_name() -> Cow<'static, str> {
        "Seconds".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "number"})
    }
}

/// The wait a call asked for (`wait_s`), else the server's default ([`Limits::default_wait`]).
pub(crate) fn wait_or_default(wait: Option<Seconds<WaitS>>, limits: &Limits) -> Duration {
    wait.map_or_else(|| limits.default_wait(), |w| w.get())
}

/// A closed choice (the schema lists `T`'s values) whose value is checked when the tool
/// reads it rather than when the arguments are parsed: for a parameter that matters only
/// after a lookup whose error comes first (`get_execution` says an unknown run is unknown,
/// whatever its `stream`). Any string parses; [`Choice::get`] refuses one that is not a
/// value of `T`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Choice<T> {
    Known(T),
    Unknown(String),
}

impl<T> Choice<T> {
    /// The value, or `refuse(value)` for one that is not a value of `T`.
    pub(crate) fn get<E>(self, refuse: impl FnOnce(&str) -> E) -> Result<T, E> {
        match self {
            Choice::Known(t) => Ok(t),
            Choice::Unknown(s) => Err(refuse(&s)),
        }
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Choice<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let parsed: Result<T, serde::de::value::Error> =
            T::deserialize(s.as_str().into_deserializer());
        Ok(match parsed {
            Ok(t) => Choice::Known(t),
            Err(_) => Choice::Unknown(s),
        })
    }
}

impl<T: JsonSchema> JsonSchema for Choice<T> {
    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        T::json_schema(generator)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, Deserialize, JsonSchema)]
    struct Args {
        timeout_s: Option<Seconds<TimeoutS>>,
        part: Option<Choice<Part>>,
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
    #[serde(rename_all = "lowercase")]
    #[schemars(inline)]
    enum Part {
        Head,
        Tail,
    }

    fn args(v: serde_json::Value) -> serde_json::Result<Args> {
        serde_json::from_value(v)
    }

    #[test]
    fn seconds_are_a_duration_or_a_message_naming_the_parameter() {
        let a = args(json!({"timeout_s": 1.5})).unwrap();
        assert_eq!(a.timeout_s.unwrap().get(), Duration::from_millis(1500));
        let zero = args(json!({"timeout_s": 0})).unwrap().timeout_s.unwrap();
        assert_eq!(zero.limit(), None);
        for bad in [json!(-1), json!(1e8)] {
            let e = args(json!({ "timeout_s": bad })).unwrap_err().to_string();
            assert!(
                e.contains("timeout_s must be a number of seconds between 0 and 10000000, not "),
                "{e}"
            );
        }
        assert!(args(json!({"timeout_s": "5"})).is_err());
    }

    #[test]
    fn a_choice_keeps_an_unknown_value_for_its_tool_to_refuse() {
        let a = args(json!({"part": "tail"})).unwrap();
        assert_eq!(a.part, Some(Choice::Known(Part::Tail)));
        let a = args(json!({"part": "middle"})).unwrap();
        let refused = a.part.unwrap().get(|s| format!("not {s}"));
        assert_eq!(refused, Err("not middle".to_string()));
        assert!(args(json!({"part": 3})).is_err());
    }

    #[test]
    fn the_schema_shows_a_number_and_the_choices() {
        let s = rmcp::handler::server::tool::schema_for_input::<Args>().unwrap();
        let props = &s["properties"];
        assert_eq!(props["timeout_s"]["type"], json!(["number", "null"]));
        assert_eq!(
            props["part"]["enum"],
            json!(["head", "tail", null]),
            "{s:?}"
        );
    }
}
