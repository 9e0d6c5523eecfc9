//! Where credentials live in a home directory: the stores a profile with
//! `mask_credentials` hides in every home, each with why it is one, and how the homes and
//! the stores present in them are found. The shim looks when a launch is taken (not when
//! its tree was set up), so a store made or replaced since is found too.

use std::path::{Path, PathBuf};

/// Each credential store, as a path relative to a home directory, and why it is one. A
/// directory is hidden whole; a file alone where its directory holds more than secrets.
pub const STORES: &[(&str, &str)] = &[
    (
        ".ssh",
        "SSH private keys, and the hosts and accounts they open (config, known_hosts, authorized_keys)",
    ),
    (".gnupg", "GnuPG private keys and the agent's sockets"),
    (
        ".password-store",
        "pass(1): every password (encrypted to a key that may sit in ~/.gnupg) and the names of the accounts",
    ),
    (
        ".aws",
        "AWS access keys (credentials), profiles and cached SSO and CLI tokens",
    ),
    (
        ".azure",
        "Azure CLI access and refresh tokens (msal_token_cache)",
    ),
    (
        ".config/gcloud",
        "Google Cloud SDK credentials, access tokens and application default credentials",
    ),
    (
        ".kube",
        "kubeconfig: cluster certificates, client keys and tokens",
    ),
    (
        ".docker",
        "Docker registry logins (config.json) and the client keys of remote daemons' contexts",
    ),
    (
        ".config/containers/auth.json",
        "Podman, Buildah and Skopeo registry logins",
    ),
    (".config/gh", "GitHub CLI's OAuth token (hosts.yml)"),
    (".bundle/config", "Bundler's gem-source credentials"),
    (".yarnrc.yml", "Yarn's registry tokens (npmAuthToken)"),
    (
        ".config/pip/pip.conf",
        "pip's index URLs, which carry their logins",
    ),
    (
        ".pip/pip.conf",
        "pip's index URLs, which carry their logins (its older place)",
    ),
    (
        ".composer/auth.json",
        "Composer's registry and forge tokens",
    ),
    (
        ".config/composer/auth.json",
        "Composer's registry and forge tokens",
    ),
    (".terraformrc", "Terraform's registry and cloud tokens"),
    (".config/hub", "hub's GitHub token"),
    (
        ".git-credentials",
        "git's credential store: host, user and password or token in plain text",
    ),
    (
        ".config/git/credentials",
        "git's credential store at its XDG path",
    ),
    (
        ".netrc",
        "logins and passwords by host, read by curl, git, ftp and pip",
    ),
    (".pgpass", "PostgreSQL passwords"),
    (
        ".my.cnf",
        "MySQL and MariaDB client options, a password among them as a rule",
    ),
    (
        ".mylogin.cnf",
        "MySQL login paths: passwords obfuscated, not encrypted",
    ),
    (".npmrc", "npm registry tokens"),
    (".pypirc", "PyPI upload tokens and passwords"),
    (
        ".cargo/credentials.toml",
        "crates.io (and other registries') publish tokens",
    ),
    (
        ".cargo/credentials",
        "the same tokens under the file's older name",
    ),
    (".gem/credentials", "RubyGems push API keys"),
    (
        ".m2/settings.xml",
        "Maven's repository and server passwords",
    ),
    (
        ".m2/settings-security.xml",
        "the master password that decrypts Maven's",
    ),
    (
        ".gradle/gradle.properties",
        "Gradle's repository and publishing credentials",
    ),
    (
        ".terraform.d/credentials.tfrc.json",
        "Terraform Cloud and Enterprise API tokens",
    ),
    (".vault-token", "a HashiCorp Vault token"),
    (".s3cfg", "s3cmd's access keys"),
    (".boto", "gsutil's and boto's keys and OAuth tokens"),
    (
        ".config/rclone/rclone.conf",
        "rclone remotes: cloud storage keys and tokens",
    ),
    (
        ".local/share/keyrings",
        "GNOME Keyring's stores: passwords, in plain text where the login keyring has none",
    ),
    (".local/share/kwalletd", "KDE Wallet's stores"),
    (
        ".mozilla",
        "Firefox profiles: session cookies (logged-in sessions) and saved logins, decryptable without a primary password",
    ),
    (
        ".config/google-chrome",
        "Chrome profiles: session cookies and saved passwords (without a keyring, encrypted under a fixed key)",
    ),
    (
        ".config/chromium",
        "Chromium profiles: session cookies and saved passwords, as Chrome's",
    ),
];

/// Home directories looked in whatever `/etc/passwd` says: root's, and every directory
/// under `/home` (`*` matches one level). Configuration adds more (`exec.extra_homes`).
pub const HOMES: &[&str] = &["/root", "/home/*"];

/// The first uid of a person's account (login.defs' `UID_MIN` by default): the homes
/// `/etc/passwd` gives such accounts are looked in too, wherever they are. System
/// accounts' homes (`/`, `/usr/sbin`, `/var/lib/…`) are not: they would cost a look per
/// launch on every host for stores that are rarely there (`exec.extra_homes` adds one).
pub const FIRST_PERSON_UID: u32 = 1000;

/// The homes `/etc/passwd` (its text) gives people's accounts: uid at least
/// [`FIRST_PERSON_UID`], below `nobody` (65534), an absolute home.
pub fn passwd_homes(passwd: &str) -> Vec<PathBuf> {
    passwd
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            let uid: u32 = fields.get(2)?.parse().ok()?;
            let home = fields.get(5)?;
            ((FIRST_PERSON_UID..65534).contains(&uid) && home.starts_with('/'))
                .then(|| PathBuf::from(home))
        })
        .collect()
}

/// The homes among `candidates` that are directories, each resolved through symlinks and
/// named once.
pub fn homes(candidates: impl IntoIterator<Item = PathBuf>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = candidates
        .into_iter()
        .filter_map(|c| std::fs::canonicalize(c).ok())
        .filter(|c| c.is_dir())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The credential stores present in `home` (resolved through symlinks already), each
/// resolved through symlinks too. A store that is a symlink out of its home is left out:
/// what it points to is not the home's (and a user must not be able to hide any path of
/// the host from every launch by making a link in their home); it is reachable at its own
/// path, where the profile's own denied paths apply.
pub fn stores_in(home: &Path) -> Vec<PathBuf> {
    STORES
        .iter()
        .filter_map(|(rel, _)| std::fs::canonicalize(home.join(rel)).ok())
        .filter(|real| real.starts_with(home))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the outside review named, at least: each store is listed, relative, with a
    /// reason, once.
    #[test]
    fn the_usual_stores_are_listed_each_with_a_reason() {
        for want in [
            ".ssh",
            ".gnupg",
            ".aws",
            ".azure",
            ".config/gcloud",
            ".config/gh",
            ".docker",
            ".kube",
            ".netrc",
            ".git-credentials",
            ".config/git/credentials",
            ".pgpass",
            ".my.cnf",
            ".npmrc",
            ".pypirc",
            ".cargo/credentials",
            ".cargo/credentials.toml",
            ".terraform.d/credentials.tfrc.json",
            ".vault-token",
            ".password-store",
            ".local/share/keyrings",
            ".mozilla",
            ".config/google-chrome",
            ".config/chromium",
        ] {
            assert!(STORES.iter().any(|(p, _)| *p == want), "{want} is missing");
        }
        for (i, (path, why)) in STORES.iter().enumerate() {
            assert!(!why.trim().is_empty(), "{path} has no reason");
            assert!(
                !path.starts_with('/') && !path.split('/').any(|c| c.is_empty() || c == ".."),
                "{path} is not a plain relative path"
            );
            assert!(
                !STORES[..i].iter().any(|(p, _)| p == path),
                "{path} is listed twice"
            );
        }
    }

    #[test]
    fn passwd_gives_the_homes_of_peoples_accounts_only() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n\
                      daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n\
                      systemd-network:x:998:998::/:/usr/sbin/nologin\n\
                      alice:x:1000:1000:Alice:/home/alice:/bin/bash\n\
                      bob:x:1001:1001::/srv/people/bob:/bin/sh\n\
                      odd:x:1002:1002::relative:/bin/sh\n\
                      broken line\n\
                      nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
        assert_eq!(
            passwd_homes(passwd),
            [
                PathBuf::from("/home/alice"),
                PathBuf::from("/srv/people/bob")
            ]
        );
    }

    /// Found as they are now: nested stores, a store replaced by a symlink inside the home
    /// (followed), one out of it (left out), and nothing for what is absent.
    #[test]
    fn stores_are_found_as_the_home_holds_them_now() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let home = root.join("alice");
        let outside = root.join("elsewhere");
        for d in [".ssh", ".aws", ".config/gh", ".docker", "dotfiles/kube"] {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(home.join(".aws/credentials"), "k").unwrap();
        std::fs::write(home.join(".netrc"), "machine m").unwrap();
        std::os::unix::fs::symlink(home.join("dotfiles/kube"), home.join(".kube")).unwrap();
        std::os::unix::fs::symlink(&outside, home.join(".gnupg")).unwrap();
        let found = stores_in(&home);
        for want in [
            ".ssh",
            ".aws",
            ".config/gh",
            ".docker",
            ".netrc",
            "dotfiles/kube",
        ] {
            assert!(found.contains(&home.join(want)), "{want}: {found:?}");
        }
        assert!(!found.iter().any(|f| f.starts_with(&outside)), "{found:?}");
        assert_eq!(found.len(), 6, "{found:?}");
        // A store made afterwards is found by the next look.
        std::fs::create_dir_all(home.join(".config/gcloud")).unwrap();
        assert!(stores_in(&home).contains(&home.join(".config/gcloud")));
        // Homes: directories only, through symlinks, once each.
        std::os::unix::fs::symlink(&home, root.join("link")).unwrap();
        let found = homes([
            home.clone(),
            root.join("link"),
            root.join("missing"),
            home.join(".netrc"),
        ]);
        assert_eq!(found, [home]);
    }
}
