// Command renga runs and operates a Renga deployment.
package main

import (
	"os"

	"renga.dev/renga/cli"
)

func main() { os.Exit(cli.Execute(os.Args[1:])) }
