//! The words of Argos's closed sets, defined once for every daemon, `argosctl` and the
//! stores: each enum's spelling is derived (strum), so a word is written in one place.
//! With `wire` (the default), their conversions to and from the gRPC messages' enums.
#![forbid(unsafe_code)]

#[cfg(feature = "wire")]
use argos_proto::exec::v1 as pb;
use serde::{Deserialize, Serialize};

/// Where a command runs: the risk gate's places.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
    strum::VariantNames,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Place {
    /// `inspect` when read-only, else `host` after an approval.
    Auto,
    /// The `agent` profile: runs at once whatever it does; containment is the guard.
    Sandbox,
    /// The `inspect` profile: the host, read-only; only what is read-only.
    Inspect,
    /// The `host` profile: root on the host, after an approval of the exact request.
    Host,
}

impl Place {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The word's place, if it names one.
    pub fn parse(word: &str) -> Option<Place> {
        word.parse().ok()
    }

    /// The profile a place runs in (`auto` is decided before this is asked).
    pub fn profile(self) -> &'static str {
        match self {
            Place::Sandbox => "agent",
            Place::Inspect | Place::Auto => "inspect",
            Place::Host => "host",
        }
    }

    /// The place a profile name stands for (`operator`: the host profile's old name).
    pub fn of_profile(profile: &str) -> Option<Place> {
        let profile = if profile == "operator" {
            "host"
        } else {
            profile
        };
        [Place::Sandbox, Place::Inspect, Place::Host]
            .into_iter()
            .find(|p| p.profile() == profile)
    }

    /// The place for the wire.
    #[cfg(feature = "wire")]
    pub fn wire(self) -> pb::Place {
        match self {
            Place::Auto => pb::Place::Auto,
            Place::Sandbox => pb::Place::Sandbox,
            Place::Inspect => pb::Place::Inspect,
            Place::Host => pb::Place::Host,
        }
    }

    /// A place from the wire (unspecified: auto), or why the number names none.
    #[cfg(feature = "wire")]
    pub fn from_wire(v: i32) -> Result<Place, String> {
        match pb::Place::try_from(v) {
            Ok(pb::Place::Unspecified | pb::Place::Auto) => Ok(Place::Auto),
            Ok(pb::Place::Sandbox) => Ok(Place::Sandbox),
            Ok(pb::Place::Inspect) => Ok(Place::Inspect),
            Ok(pb::Place::Host) => Ok(Place::Host),
            Err(_) => Err(format!(
                "{v} is not a place ({})",
                <Place as strum::VariantNames>::VARIANTS.join(", ")
            )),
        }
    }
}

#[cfg(all(test, feature = "wire"))]
mod tests {
    use super::*;
    use strum::VariantArray as _;

    #[test]
    fn a_place_reads_as_it_is_written_on_the_wire_in_stores_and_in_json() {
        for p in Place::VARIANTS {
            assert_eq!(Place::parse(p.as_str()), Some(*p));
            assert_eq!(Place::from_wire(p.wire() as i32), Ok(*p));
            assert_eq!(
                serde_json::to_string(p).unwrap(),
                format!("\"{}\"", p.as_str())
            );
        }
        assert_eq!(Place::Sandbox.as_str(), "sandbox");
        assert_eq!(Place::parse("Sandbox"), None);
        assert_eq!(Place::from_wire(0), Ok(Place::Auto));
        assert!(
            Place::from_wire(99)
                .unwrap_err()
                .contains("auto, sandbox, inspect, host")
        );
        assert_eq!(Place::of_profile("operator"), Some(Place::Host));
        assert_eq!(Place::of_profile("agent"), Some(Place::Sandbox));
    }
}
