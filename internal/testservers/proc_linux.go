package testservers

import (
	"os"
	"os/exec"
	"syscall"
)

// setProcAttr puts the child in its own process group (so that kill reaches
// all its children) and has the kernel kill it if the thread that started
// it dies (see startProcess).
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func killGroup(p *os.Process) error { return syscall.Kill(-p.Pid, syscall.SIGKILL) }
