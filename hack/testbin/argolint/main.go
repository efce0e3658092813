// Command argolint runs Argo Workflows' own offline linter (the code behind `argo lint --offline`) on the
// files given, at the Argo version pinned in versions.env.
//
// Why a wrapper: the `argo` CLI cannot be built from the Argo module since v3.7 (its UI is embedded from a
// directory the module zip lacks), but the lint package and the offline client it needs can.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/argoproj/argo-workflows/v3/cmd/argo/lint"
	"github.com/argoproj/argo-workflows/v3/pkg/apiclient"
)

func main() {
	files := os.Args[1:]
	if len(files) == 0 {
		fmt.Fprintln(os.Stderr, "usage: argolint FILE...")
		os.Exit(2)
	}
	ctx, client, err := apiclient.NewClientFromOpts(apiclient.Opts{Offline: true, OfflineFiles: files, Context: context.Background()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	err = lint.RunLint(ctx, client, []string{"workflows", "workflowtemplates"}, "simple", true,
		lint.LintOptions{Files: files, Strict: true, DefaultNamespace: "default", Printer: os.Stdout})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
