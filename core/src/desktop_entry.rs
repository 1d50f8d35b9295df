//! Hidden desktop entries that let KDE Plasma's KWin give one program screenshots, for the
//! connector's installed copy and for the desktop client.
//!
//! KWin answers a program on its `org.kde.KWin.ScreenShot2` interface only when an installed
//! entry whose `Exec` names that program's file lists the interface under
//! `X-KDE-DBUS-Restricted-Interfaces`, as Spectacle's does; KDE's portal instead asks in a
//! dialog for every screenshot. `NoDisplay` keeps the entry out of the application menus.

use std::path::PathBuf;

/// The D-Bus interface the entries allow.
pub const KWIN_SCREENSHOT_INTERFACE: &str = "org.kde.KWin.ScreenShot2";

/// A hidden entry named `name` whose `Exec` line is `exec` (its words quoted with
/// [`exec_word`] where they need it), allowed KWin's screenshots.
#[must_use]
pub fn screenshot_entry(name: &str, comment: &str, exec: &str) -> String {
    format!(
        "[Desktop Entry]\n\
         Type=Application\n\
         Name={name}\n\
         Comment={comment}\n\
         Exec={exec}\n\
         NoDisplay=true\n\
         Terminal=false\n\
         X-KDE-DBUS-Restricted-Interfaces={KWIN_SCREENSHOT_INTERFACE}\n"
    )
}

/// One `Exec=` word as the desktop entry specification reads it back: double-quoted with `"`,
/// `` ` ``, `$` and `\` escaped by a backslash, then every backslash doubled again as the value
/// is a string, and `%` doubled against field codes.
#[must_use]
pub fn exec_word(word: &str) -> String {
    let mut quoted = String::from("\"");
    for c in word.chars() {
        if matches!(c, '"' | '`' | '$' | '\\') {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    quoted.replace('\\', "\\\\").replace('%', "%%")
}

/// Where a user's own desktop entries go: `$XDG_DATA_HOME/applications` when that is an
/// absolute path, else `~/.local/share/applications`; `None` without either.
#[must_use]
pub fn user_applications() -> Option<PathBuf> {
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|path| path.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|path| path.is_absolute())
                .map(|home| home.join(".local").join("share"))
        })?;
    Some(data.join("applications"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_allows_kwins_screenshots_and_stays_out_of_menus() {
        let entry = screenshot_entry("X", "Why", &format!("{} gui", exec_word("/a b/x")));
        assert!(entry.starts_with("[Desktop Entry]\nType=Application\nName=X\n"));
        assert!(entry.contains("\nExec=\"/a b/x\" gui\n"));
        assert!(entry.contains("\nNoDisplay=true\n"));
        assert!(entry.ends_with("\nX-KDE-DBUS-Restricted-Interfaces=org.kde.KWin.ScreenShot2\n"));
    }

    #[test]
    fn exec_words_come_back_as_written() {
        assert_eq!(
            exec_word(r#"/a "b" $c `d` \e %f"#),
            r#""/a \\"b\\" \\$c \\`d\\` \\\\e %%f""#
        );
    }
}
