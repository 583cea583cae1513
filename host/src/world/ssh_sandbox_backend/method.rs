//! The sandbox backend's methods as a controller names them (OpenClaw's
//! handle, bridge and manager operations, camelCase), and what each takes.

/// One method of the sandbox world.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// `{}`: warnings.
    ValidateConfiguration,
    /// `{}`: the remote utility contract.
    Preflight,
    /// `{scope}`.
    DescribeRuntime,
    /// `{scope}`: adopt or seed.
    EnsureRuntime,
    /// `{scope}`.
    RemoveRuntime,
    /// `{scope}`: remove and seed again.
    RecreateRuntime,
    /// `{scope, workdir}`.
    ValidateWorkdir,
    /// `{scope}`: where the scope's workspace is on the target, from the
    /// settings and the scope alone (OpenClaw's `resolveWorkdir`): the host
    /// answers it from its own layout, with no component call and no
    /// connection.
    ResolveWorkdir,
    /// `{scope, command, workdir?, env?, stdin?, timeoutMs?, pty?, openStdin?}`;
    /// output streams; with `openStdin`, `$/input` reaches the command's stdin
    /// after `stdin` (otherwise `stdin` is written and closed).
    Exec,
    /// `{scope, script, args?, stdin?, allowFailure?, timeoutMs?}`.
    RunShellCommand,
    /// `{scope, filePath, cwd?}`.
    ResolvePath,
    /// `{scope, filePath, cwd?, maxBytes?}`.
    ReadFile,
    /// `{scope, filePath, cwd?, data | text, mkdir?}`.
    WriteFile,
    /// `{scope, filePath, cwd?, data | text, mkdir?}`.
    CreateFileExclusive,
    /// `{scope, filePath, cwd?}`.
    Mkdirp,
    /// `{scope, filePath, cwd?, recursive?, force?}`.
    Remove,
    /// `{scope, from, to, cwd?}`.
    Rename,
    /// `{scope, filePath, cwd?}`.
    Stat,
    /// `{scope, filePath, cwd?}`.
    ReadDirectory,
    /// `{scope, filePath, cwd?, edits | oldText + newText}`.
    Edit,
    /// `{scope, input, cwd?}`.
    ApplyPatch,
    /// `{scope, filePath, cwd?, maxBytes?}`.
    ReadMedia,
}

const ALL: &[(Method, &str)] = &[
    (Method::ValidateConfiguration, "validateConfiguration"),
    (Method::Preflight, "preflight"),
    (Method::DescribeRuntime, "describeRuntime"),
    (Method::EnsureRuntime, "ensureRuntime"),
    (Method::RemoveRuntime, "removeRuntime"),
    (Method::RecreateRuntime, "recreateRuntime"),
    (Method::ValidateWorkdir, "validateWorkdir"),
    (Method::ResolveWorkdir, "resolveWorkdir"),
    (Method::Exec, "exec"),
    (Method::RunShellCommand, "runShellCommand"),
    (Method::ResolvePath, "resolvePath"),
    (Method::ReadFile, "readFile"),
    (Method::WriteFile, "writeFile"),
    (Method::CreateFileExclusive, "createFileExclusive"),
    (Method::Mkdirp, "mkdirp"),
    (Method::Remove, "remove"),
    (Method::Rename, "rename"),
    (Method::Stat, "stat"),
    (Method::ReadDirectory, "readDirectory"),
    (Method::Edit, "edit"),
    (Method::ApplyPatch, "applyPatch"),
    (Method::ReadMedia, "readMedia"),
];

impl Method {
    /// The name a controller calls it by.
    pub fn name(self) -> &'static str {
        ALL.iter()
            .find(|(m, _)| *m == self)
            .map(|(_, n)| *n)
            .unwrap_or_default()
    }

    /// The method called `name`.
    pub fn from_name(name: &str) -> Option<Method> {
        ALL.iter().find(|(_, n)| *n == name).map(|(m, _)| *m)
    }

    /// Every method name, comma separated, for messages.
    pub fn names() -> String {
        ALL.iter().map(|(_, n)| *n).collect::<Vec<_>>().join(", ")
    }

    /// Every method.
    pub fn all() -> impl Iterator<Item = Method> {
        ALL.iter().map(|(m, _)| *m)
    }

    /// Whether the method acts on a scope (takes `scope`).
    pub fn scoped(self) -> bool {
        !matches!(self, Method::ValidateConfiguration | Method::Preflight)
    }

    /// The script operations a call of this method may run: its row of
    /// [`occ_ssh_target::envelope::METHOD_OPS`], the table the component's
    /// own tests run every method under, so that the two cannot disagree.
    pub fn script_ops(self) -> &'static [&'static str] {
        occ_ssh_target::envelope::method_ops(self.name()).unwrap_or_default()
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in Method::all() {
            assert_eq!(Method::from_name(m.name()), Some(m));
        }
        assert_eq!(Method::from_name("ensureNamespace"), None);
    }

    /// Every method has its row of script operations, and every row is a method.
    #[test]
    fn each_method_has_its_script_operations() {
        for m in Method::all() {
            assert!(
                occ_ssh_target::envelope::method_ops(m.name()).is_some(),
                "{m} has no row"
            );
        }
        for (name, _) in occ_ssh_target::envelope::METHOD_OPS {
            assert!(Method::from_name(name).is_some(), "{name} is no method");
        }
        assert_eq!(Method::RemoveRuntime.script_ops(), ["remove-runtime"]);
        assert_eq!(Method::Preflight.script_ops(), ["preflight"]);
        assert!(Method::ValidateConfiguration.script_ops().is_empty());
    }
}
