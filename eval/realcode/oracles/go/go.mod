module graphmem/eval/realcode/oracles/go

go 1.22
