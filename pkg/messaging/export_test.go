package messaging

import "github.com/IBM/sarama"

// PartitionOf is the partition among n that the services' publisher (and
// the Java client, and franz-go) puts key on: tests use it to pick keys
// that share a partition or spread over all of them.
func PartitionOf(key string, n int32) int32 {
	p, err := murmur2Partitioner()("").Partition(&sarama.ProducerMessage{Key: sarama.StringEncoder(key)}, n)
	if err != nil {
		panic(err) // the hash partitioner fails only for n <= 0
	}
	return p
}
