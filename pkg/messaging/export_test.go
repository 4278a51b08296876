package messaging

// PartitionOf is KeyPartition for tests, which pick keys that share a
// partition or spread over all of them.
func PartitionOf(key string, n int32) int32 {
	p, err := KeyPartition(key, n)
	if err != nil {
		panic(err) // the hash partitioner fails only for n <= 0
	}
	return p
}
