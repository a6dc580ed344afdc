// Command kfake runs an in-process Kafka (franz-go's kfake, a Kafka
// protocol server) on a loopback port and prints its address, for trying
// gflink's Kafka input and output without a Kafka installation and for
// shell scripts that drive the gflink binary. It runs until interrupted
// or until its standard input closes, then stops the cluster.
//
// Usage:
//
//	go run ./scripts/kfake [-port 0] [-topics lines:8,counts:1] [-produce lines=file] [-read counts]
//
// -produce writes a file's lines to a topic (round robin) before the
// address is printed; -read prints a topic's values as a read_committed
// consumer sees them and exits (against a running kfake: -brokers).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gflink/gflink/connectors/kafka"
	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	port := flag.Int("port", 0, "port to listen on (0: a free one)")
	topics := flag.String("topics", "", "topics to create, as name:partitions[,name:partitions...]")
	produce := flag.String("produce", "", "write a file's lines to a topic, as topic=file[,topic=file...]")
	read := flag.String("read", "", "print a topic's committed values and exit (with -brokers)")
	brokers := flag.String("brokers", "", "with -read: the brokers of a running Kafka")
	flag.Parse()
	if err := run(*port, *topics, *produce, *read, *brokers); err != nil {
		fmt.Fprintln(os.Stderr, "kfake:", err)
		os.Exit(1)
	}
}

func run(port int, topics, produce, read, brokers string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if read != "" {
		if brokers == "" {
			return fmt.Errorf("-read needs -brokers host:port")
		}
		vals, err := kafka.ReadToEnd(ctx, strings.Split(brokers, ","), read, true)
		for _, v := range vals {
			fmt.Println(v)
		}
		return err
	}
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(port)}
	for _, tp := range strings.Split(topics, ",") {
		if tp == "" {
			continue
		}
		name, n, _ := strings.Cut(tp, ":")
		parts, err := strconv.Atoi(n)
		if err != nil || parts <= 0 {
			return fmt.Errorf("-topics: expected name:partitions, got %q", tp)
		}
		opts = append(opts, kfake.SeedTopics(int32(parts), name))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	addrs := c.ListenAddrs()
	for _, tf := range strings.Split(produce, ",") {
		if tf == "" {
			continue
		}
		topic, file, _ := strings.Cut(tf, "=")
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		n, err := kafka.ProduceLines(ctx, addrs, topic, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("produce %s to %s: %w", file, topic, err)
		}
		fmt.Fprintf(os.Stderr, "kfake: %d lines of %s in %s\n", n, file, topic)
	}
	fmt.Println(strings.Join(addrs, ","))
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(closed)
	}()
	select {
	case <-stop:
	case <-closed:
	}
	return nil
}
