module leaf.dev/client

go 1.19
