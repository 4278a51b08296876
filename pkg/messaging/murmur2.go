package messaging

import (
	"encoding/binary"
	"fmt"
	"hash"

	"github.com/IBM/sarama"
)

// murmur2Partitioner picks partitions exactly as the Java client's default
// partitioner does — toPositive(murmur2(key)) % partitions — so franz-go,
// librdkafka with partitioner=murmur2_random and the Java client send an
// order's events to the same partition as the services.
//
// Written here because Sarama ships no murmur2 and franz-go keeps its copy
// unexported; Sarama's WithAbsFirst supplies Java's toPositive.
func murmur2Partitioner() sarama.PartitionerConstructor {
	return sarama.NewCustomPartitioner(sarama.WithAbsFirst(), sarama.WithCustomHashFunction(newMurmur2))
}

// KeyPartition is the partition among n that the services' publisher puts
// key on — and so the Java client and franz-go's default partitioner. The
// drills check other clients against it.
func KeyPartition(key string, n int32) (int32, error) {
	p, err := murmur2Partitioner()("").Partition(&sarama.ProducerMessage{Key: sarama.StringEncoder(key)}, n)
	if err != nil {
		return 0, fmt.Errorf("partition of %q among %d: %w", key, n, err)
	}
	return p, nil
}

// murmur2 is Kafka's 32-bit murmur2 (seed 0x9747b28c) as a hash.Hash32. It
// buffers its input: keys are short order ids.
type murmur2 struct {
	buf []byte
}

func newMurmur2() hash.Hash32 { return &murmur2{} }

func (m *murmur2) Write(p []byte) (int, error) {
	m.buf = append(m.buf, p...)
	return len(p), nil
}

func (m *murmur2) Sum(b []byte) []byte { return binary.BigEndian.AppendUint32(b, m.Sum32()) }

func (m *murmur2) Reset() { m.buf = m.buf[:0] }

func (m *murmur2) Size() int { return 4 }

func (m *murmur2) BlockSize() int { return 4 }

func (m *murmur2) Sum32() uint32 {
	const (
		seed uint32 = 0x9747b28c
		mul  uint32 = 0x5bd1e995
		r           = 24
	)
	data := m.buf
	length := len(data)
	h := seed ^ uint32(length)
	for len(data) >= 4 {
		k := binary.LittleEndian.Uint32(data)
		k *= mul
		k ^= k >> r
		k *= mul
		h *= mul
		h ^= k
		data = data[4:]
	}
	switch len(data) {
	case 3:
		h ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[0])
		h *= mul
	}
	h ^= h >> 13
	h *= mul
	h ^= h >> 15
	return h
}
