package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

// runKubectl runs kubectl (the same version as the control plane) in-process:
// `devcluster kubectl get ns` behaves like `kubectl get ns`, honouring KUBECONFIG/--kubeconfig.
func runKubectl(args []string) {
	os.Args = append([]string{"kubectl"}, args...)
	logs.GlogSetter(kubectlcmd.GetLogVerbosity(os.Args)) // nolint:errcheck
	command := kubectlcmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
	os.Exit(0)
}
