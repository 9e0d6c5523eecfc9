//! Writes argosctl's man pages (one per command, plain and gzipped) and its bash, zsh and fish completions
//! from the same definition the binary parses with (src/cli.rs), into OUT_DIR and, for
//! the Debian package, into the profile's directory: `target/<profile>/man/*.1` and
//! `target/<profile>/completions/`.

use std::path::{Path, PathBuf};

use clap::CommandFactory as _;
use clap_complete::Shell;

#[path = "src/cli.rs"]
#[allow(dead_code)]
mod cli;

fn main() -> std::io::Result<()> {
    println!("cargo::rerun-if-changed=src/cli.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    write_all(&out)?;
    // OUT_DIR is target/<profile>/build/argos-ctl-<hash>/out.
    if let Some(profile_dir) = out.ancestors().nth(3) {
        write_all(profile_dir)?;
    }
    Ok(())
}

fn write_all(dir: &Path) -> std::io::Result<()> {
    let man = dir.join("man");
    std::fs::create_dir_all(&man)?;
    let mut cmd = cli::Cli::command();
    cmd.build();
    man_pages(&cmd, &man)?;
    let completions = dir.join("completions");
    std::fs::create_dir_all(&completions)?;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        clap_complete::generate_to(shell, &mut cmd, "argosctl", &completions)?;
    }
    Ok(())
}

/// One page per command and subcommand (`argosctl-jobs-start.1`); clap's `help`
/// subcommands get none.
fn man_pages(cmd: &clap::Command, dir: &Path) -> std::io::Result<()> {
    let name = cmd.get_display_name().unwrap_or_else(|| cmd.get_name());
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut page)?;
    std::fs::write(dir.join(format!("{name}.1")), &page)?;
    // And gzipped for the package: no file name, no time, so every build is the same.
    let gz = std::fs::File::create(dir.join(format!("{name}.1.gz")))?;
    let mut z = flate2::GzBuilder::new()
        .mtime(0)
        .write(gz, flate2::Compression::best());
    std::io::Write::write_all(&mut z, &page)?;
    z.finish()?;
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        man_pages(sub, dir)?;
    }
    Ok(())
}
