package main

import (
	"os"

	"github.com/gflink/gflink/cmd"
)

func main() { os.Exit(cmd.Main()) }
