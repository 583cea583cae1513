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

method_names!(Method {
    ValidateConfiguration => "validateConfiguration",
    Preflight => "preflight",
    DescribeRuntime => "describeRuntime",
    EnsureRuntime => "ensureRuntime",
    RemoveRuntime => "removeRuntime",
    RecreateRuntime => "recreateRuntime",
    ValidateWorkdir => "validateWorkdir",
    ResolveWorkdir => "resolveWorkdir",
    Exec => "exec",
    RunShellCommand => "runShellCommand",
    ResolvePath => "resolvePath",
    ReadFile => "readFile",
    WriteFile => "writeFile",
    CreateFileExclusive => "createFileExclusive",
    Mkdirp => "mkdirp",
    Remove => "remove",
    Rename => "rename",
    Stat => "stat",
    ReadDirectory => "readDirectory",
    Edit => "edit",
    ApplyPatch => "applyPatch",
    ReadMedia => "readMedia",
});

impl Method {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in Method::all() {
            assert_eq!(Method::from_name(m.name()), Some(*m));
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
