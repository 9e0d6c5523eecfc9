//! How each kind of setting is read from TOML and from the environment, and shown back:
//! the codecs the schema in `config.rs` names.

use super::*;

/// How one type is read from TOML or an environment string, and shown again.
pub(super) trait Codec<T> {
    fn read_toml(&self, v: &toml::Value) -> Result<T, String>;
    fn read_env(&self, s: &str) -> Result<T, String>;
    fn show(&self, v: &T) -> toml::Value;
}

/// A type with one natural codec.
pub(super) trait Setting: Sized {
    fn from_toml(v: &toml::Value) -> Result<Self, String>;
    fn from_env(s: &str) -> Result<Self, String>;
    fn to_toml(&self) -> toml::Value;
}

pub(super) struct Plain;

impl<T: Setting> Codec<T> for Plain {
    fn read_toml(&self, v: &toml::Value) -> Result<T, String> {
        T::from_toml(v)
    }
    fn read_env(&self, s: &str) -> Result<T, String> {
        T::from_env(s)
    }
    fn show(&self, v: &T) -> toml::Value {
        v.to_toml()
    }
}

/// A whole number within `[min, max]`.
pub(super) struct Between(pub(super) u64, pub(super) u64);

impl Between {
    fn check(&self, v: u64) -> Result<u64, String> {
        if (self.0..=self.1).contains(&v) {
            Ok(v)
        } else {
            Err(format!("{v} is outside {} to {}", self.0, self.1))
        }
    }
}

impl Codec<u64> for Between {
    fn read_toml(&self, v: &toml::Value) -> Result<u64, String> {
        self.check(u64::from_toml(v)?)
    }
    fn read_env(&self, s: &str) -> Result<u64, String> {
        self.check(u64::from_env(s)?)
    }
    fn show(&self, v: &u64) -> toml::Value {
        v.to_toml()
    }
}

/// Octal permission bits written as a string, e.g. `"0660"`.
pub(super) struct Mode;

impl Codec<u32> for Mode {
    fn read_toml(&self, v: &toml::Value) -> Result<u32, String> {
        match v {
            toml::Value::String(s) => self.read_env(s),
            other => Err(format!(
                "expected an octal string like \"0660\", found {}",
                other.type_str()
            )),
        }
    }
    fn read_env(&self, s: &str) -> Result<u32, String> {
        let m = u32::from_str_radix(s.trim(), 8)
            .map_err(|_| format!("expected an octal mode like \"0660\", found {s:?}"))?;
        if m > 0o777 {
            return Err(format!("mode {s:?} has bits beyond 0777"));
        }
        Ok(m)
    }
    fn show(&self, v: &u32) -> toml::Value {
        toml::Value::String(format!("{v:04o}"))
    }
}

/// A list of containment dimension names.
/// One of a fixed set of words.
pub(super) struct Choice(pub(super) &'static [&'static str]);

impl Codec<String> for Choice {
    fn read_toml(&self, v: &toml::Value) -> Result<String, String> {
        self.read_env(&String::from_toml(v)?)
    }
    fn read_env(&self, s: &str) -> Result<String, String> {
        if self.0.contains(&s) {
            Ok(s.to_string())
        } else {
            Err(format!("{s:?} is not one of {}", self.0.join(", ")))
        }
    }
    fn show(&self, v: &String) -> toml::Value {
        toml::Value::String(v.clone())
    }
}

/// A list of strings, each checked by `check`.
pub(super) fn string_list(
    v: &toml::Value,
    what: &str,
    check: impl Fn(&str) -> Result<(), String>,
) -> Result<Vec<String>, String> {
    match v {
        toml::Value::Array(items) => {
            let items: Vec<String> = items
                .iter()
                .map(String::from_toml)
                .collect::<Result<_, _>>()?;
            items.iter().try_for_each(|i| check(i))?;
            Ok(items)
        }
        v => type_err(what, v),
    }
}

pub(super) fn comma_list(
    s: &str,
    check: impl Fn(&str) -> Result<(), String>,
) -> Result<Vec<String>, String> {
    let items: Vec<String> = s
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(String::from)
        .collect();
    items.iter().try_for_each(|i| check(i))?;
    Ok(items)
}

pub(super) fn check_ip(s: &str) -> Result<(), String> {
    s.parse::<std::net::IpAddr>()
        .map(|_| ())
        .map_err(|_| format!("{s:?} is not an IP address"))
}

pub(super) fn check_origin(s: &str) -> Result<(), String> {
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))
        .ok_or_else(|| format!("{s:?} is not an origin (scheme://host[:port])"))?;
    if rest.is_empty() || rest.contains('/') {
        return Err(format!(
            "{s:?} is not an origin (scheme://host[:port], no path)"
        ));
    }
    Ok(())
}

/// A host name as a `Host` header names it: `host` or `host:port`, no scheme or path.
pub(super) fn check_host(s: &str) -> Result<(), String> {
    let ok = !s.is_empty()
        && s.len() <= 253
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!("{s:?} is not a host (host or host:port)"))
    }
}

pub(super) struct Hosts;

impl Codec<Vec<String>> for Hosts {
    fn read_toml(&self, v: &toml::Value) -> Result<Vec<String>, String> {
        string_list(v, "a list of host names", check_host)
    }
    fn read_env(&self, s: &str) -> Result<Vec<String>, String> {
        comma_list(s, check_host)
    }
    fn show(&self, v: &Vec<String>) -> toml::Value {
        toml::Value::Array(v.iter().map(|s| toml::Value::String(s.clone())).collect())
    }
}

pub(super) struct IpList;

impl Codec<Vec<String>> for IpList {
    fn read_toml(&self, v: &toml::Value) -> Result<Vec<String>, String> {
        string_list(v, "a list of IP addresses", check_ip)
    }
    fn read_env(&self, s: &str) -> Result<Vec<String>, String> {
        comma_list(s, check_ip)
    }
    fn show(&self, v: &Vec<String>) -> toml::Value {
        toml::Value::Array(v.iter().map(|s| toml::Value::String(s.clone())).collect())
    }
}

pub(super) struct Origins;

impl Codec<Vec<String>> for Origins {
    fn read_toml(&self, v: &toml::Value) -> Result<Vec<String>, String> {
        string_list(v, "a list of origins", check_origin)
    }
    fn read_env(&self, s: &str) -> Result<Vec<String>, String> {
        comma_list(s, check_origin)
    }
    fn show(&self, v: &Vec<String>) -> toml::Value {
        toml::Value::Array(v.iter().map(|s| toml::Value::String(s.clone())).collect())
    }
}

/// A list of absolute paths, `*` in a component matching one level.
pub(super) struct PathPatterns;

pub(super) fn check_absolute(s: &str) -> Result<(), String> {
    if s.starts_with('/') && !s.contains('\0') && !s.split('/').any(|c| c == "..") {
        Ok(())
    } else {
        Err(format!("{s:?} is not an absolute path without .."))
    }
}

impl Codec<Vec<PathBuf>> for PathPatterns {
    fn read_toml(&self, v: &toml::Value) -> Result<Vec<PathBuf>, String> {
        string_list(v, "a list of absolute paths", check_absolute)
            .map(|l| l.into_iter().map(PathBuf::from).collect())
    }
    fn read_env(&self, s: &str) -> Result<Vec<PathBuf>, String> {
        comma_list(s, check_absolute).map(|l| l.into_iter().map(PathBuf::from).collect())
    }
    fn show(&self, v: &Vec<PathBuf>) -> toml::Value {
        toml::Value::Array(
            v.iter()
                .map(|p| toml::Value::String(p.display().to_string()))
                .collect(),
        )
    }
}

pub(super) struct Dimensions;

impl Codec<Vec<String>> for Dimensions {
    fn read_toml(&self, v: &toml::Value) -> Result<Vec<String>, String> {
        match v {
            toml::Value::Array(items) => {
                let names: Result<Vec<String>, String> =
                    items.iter().map(String::from_toml).collect();
                self.check(names?)
            }
            v => type_err("a list of dimension names", v),
        }
    }
    fn read_env(&self, s: &str) -> Result<Vec<String>, String> {
        self.check(
            s.split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(String::from)
                .collect(),
        )
    }
    fn show(&self, v: &Vec<String>) -> toml::Value {
        toml::Value::Array(v.iter().map(|s| toml::Value::String(s.clone())).collect())
    }
}

impl Dimensions {
    fn check(&self, names: Vec<String>) -> Result<Vec<String>, String> {
        for n in &names {
            if !DIMENSIONS.contains(&n.as_str()) {
                return Err(format!(
                    "unknown dimension {n:?} (known: {})",
                    DIMENSIONS.join(", ")
                ));
            }
        }
        Ok(names)
    }
}

pub(super) fn type_err<T>(expected: &str, v: &toml::Value) -> Result<T, String> {
    Err(format!("expected {expected}, found {}", v.type_str()))
}

impl Setting for String {
    fn from_toml(v: &toml::Value) -> Result<Self, String> {
        match v {
            toml::Value::String(s) => Ok(s.clone()),
            v => type_err("a string", v),
        }
    }
    fn from_env(s: &str) -> Result<Self, String> {
        Ok(s.to_string())
    }
    fn to_toml(&self) -> toml::Value {
        toml::Value::String(self.clone())
    }
}

impl Setting for PathBuf {
    fn from_toml(v: &toml::Value) -> Result<Self, String> {
        Self::from_env(&String::from_toml(v)?)
    }
    fn from_env(s: &str) -> Result<Self, String> {
        let p = PathBuf::from(s);
        if s.is_empty() || !p.is_absolute() {
            return Err(format!("expected an absolute path, found {s:?}"));
        }
        Ok(p)
    }
    fn to_toml(&self) -> toml::Value {
        toml::Value::String(self.display().to_string())
    }
}

impl Setting for bool {
    fn from_toml(v: &toml::Value) -> Result<Self, String> {
        match v {
            toml::Value::Boolean(b) => Ok(*b),
            v => type_err("true or false", v),
        }
    }
    fn from_env(s: &str) -> Result<Self, String> {
        match s {
            "true" | "1" => Ok(true),
            "false" | "0" => Ok(false),
            s => Err(format!("expected true or false, found {s:?}")),
        }
    }
    fn to_toml(&self) -> toml::Value {
        toml::Value::Boolean(*self)
    }
}

impl Setting for u64 {
    fn from_toml(v: &toml::Value) -> Result<Self, String> {
        match v {
            toml::Value::Integer(i) => {
                u64::try_from(*i).map_err(|_| format!("expected a non-negative integer, found {i}"))
            }
            v => type_err("an integer", v),
        }
    }
    fn from_env(s: &str) -> Result<Self, String> {
        s.trim()
            .parse()
            .map_err(|_| format!("expected a non-negative integer, found {s:?}"))
    }
    fn to_toml(&self) -> toml::Value {
        toml::Value::Integer(i64::try_from(*self).unwrap_or(i64::MAX))
    }
}

impl Setting for SocketAddr {
    fn from_toml(v: &toml::Value) -> Result<Self, String> {
        Self::from_env(&String::from_toml(v)?)
    }
    fn from_env(s: &str) -> Result<Self, String> {
        s.parse()
            .map_err(|_| format!("expected an address like \"127.0.0.1:7000\", found {s:?}"))
    }
    fn to_toml(&self) -> toml::Value {
        toml::Value::String(self.to_string())
    }
}

impl Setting for LogFormat {
    fn from_toml(v: &toml::Value) -> Result<Self, String> {
        Self::from_env(&String::from_toml(v)?)
    }
    fn from_env(s: &str) -> Result<Self, String> {
        match s {
            "plain" => Ok(LogFormat::Plain),
            "json" => Ok(LogFormat::Json),
            s => Err(format!("expected \"plain\" or \"json\", found {s:?}")),
        }
    }
    fn to_toml(&self) -> toml::Value {
        toml::Value::String(match self {
            LogFormat::Plain => "plain".into(),
            LogFormat::Json => "json".into(),
        })
    }
}

impl Setting for IdSpec {
    fn from_toml(v: &toml::Value) -> Result<Self, String> {
        match v {
            toml::Value::Integer(i) => u32::try_from(*i)
                .map(IdSpec::Id)
                .map_err(|_| format!("expected a uid/gid between 0 and {}, found {i}", u32::MAX)),
            toml::Value::String(s) => Self::from_env(s),
            v => type_err("a name or a number", v),
        }
    }
    fn from_env(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if let Ok(n) = s.parse::<u32>() {
            return Ok(IdSpec::Id(n));
        }
        let valid = !s.is_empty()
            && s.len() <= 32
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            && !s.starts_with('-');
        if valid {
            Ok(IdSpec::Name(s.to_string()))
        } else {
            Err(format!("expected a user/group name or number, found {s:?}"))
        }
    }
    fn to_toml(&self) -> toml::Value {
        match self {
            IdSpec::Id(n) => toml::Value::Integer(i64::from(*n)),
            IdSpec::Name(s) => toml::Value::String(s.clone()),
        }
    }
}

impl Setting for Option<IdSpec> {
    fn from_toml(v: &toml::Value) -> Result<Self, String> {
        match v {
            toml::Value::String(s) if s.is_empty() => Ok(None),
            v => IdSpec::from_toml(v).map(Some),
        }
    }
    fn from_env(s: &str) -> Result<Self, String> {
        if s.trim().is_empty() {
            Ok(None)
        } else {
            IdSpec::from_env(s).map(Some)
        }
    }
    fn to_toml(&self) -> toml::Value {
        match self {
            None => toml::Value::String(String::new()),
            Some(id) => id.to_toml(),
        }
    }
}

impl Setting for Vec<IdSpec> {
    fn from_toml(v: &toml::Value) -> Result<Self, String> {
        match v {
            toml::Value::Array(items) => {
                let mut out = Vec::new();
                let mut bad = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    match IdSpec::from_toml(item) {
                        Ok(id) => out.push(id),
                        Err(e) => bad.push(format!("item {i}: {e}")),
                    }
                }
                if bad.is_empty() {
                    Ok(out)
                } else {
                    Err(bad.join("; "))
                }
            }
            v => type_err("a list", v),
        }
    }
    fn from_env(s: &str) -> Result<Self, String> {
        s.split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(IdSpec::from_env)
            .collect()
    }
    fn to_toml(&self) -> toml::Value {
        toml::Value::Array(self.iter().map(Setting::to_toml).collect())
    }
}
