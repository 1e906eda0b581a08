// Command hello is what TestBuildTemp builds: it says who runs it.
package main

import (
	"fmt"
	"os"
)

func main() { fmt.Printf("hello from uid %d\n", os.Geteuid()) }
