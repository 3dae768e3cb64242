// Command kube-network-policies is kubernetes-sigs/kube-network-policies' NetworkPolicy engine
// (its pkg/networkpolicy controller: nftables sends the first packet of each connection of a
// pod that a policy selects to an nfqueue, where the controller accepts or drops it by the
// policies) behind a small main for internal/k8stest's real node. Upstream's main reads only
// the in-cluster configuration of a DaemonSet pod; the real node's engine runs on the node
// itself, as the kubelet does, so this one takes a kubeconfig. Everything else is upstream's
// flags and defaults: fail closed (no queue bypass), queue 100, no admin policies.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
)

func main() { os.Exit(run()) }

func run() int {
	kubeconfig := flag.String("kubeconfig", "", "the kubeconfig to reach the apiserver with (required)")
	nodeName := flag.String("hostname-override", "", "the name of the node whose pods this engine polices (required)")
	queueID := flag.Int("nfqueue-id", 100, "the nfqueue the engine reads")
	failOpen := flag.Bool("fail-open", false, "accept packets when the engine is not reading its queue (upstream's flag; the real node keeps it off)")
	tableName := flag.String("nftables-table", "kube-network-policies", "the inet table the engine owns")
	klog.InitFlags(nil)
	flag.Parse()
	if *kubeconfig == "" || *nodeName == "" {
		fmt.Fprintln(os.Stderr, "kube-network-policies: -kubeconfig and -hostname-override are required")
		return 2
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kube-network-policies: read %s: %v\n", *kubeconfig, err)
		return 1
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kube-network-policies: client: %v\n", err)
		return 1
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	ctrl, err := networkpolicy.NewController(client,
		factory.Networking().V1().NetworkPolicies(),
		factory.Core().V1().Namespaces(),
		factory.Core().V1().Pods(),
		nil, nil, nil, nil,
		networkpolicy.Config{
			FailOpen:            *failOpen,
			QueueID:             *queueID,
			NodeName:            *nodeName,
			NetfilterBug1766Fix: true,
			NFTableName:         *tableName,
			// containerd 1.6 has no NRI of the version the engine speaks: pods' addresses
			// come from the apiserver only.
			NRIdisabled: true,
		})
	if err != nil {
		fmt.Fprintf(os.Stderr, "kube-network-policies: %v\n", err)
		return 1
	}
	errc := make(chan error, 1)
	go func() { errc <- ctrl.Run(ctx) }()
	factory.Start(ctx.Done())
	select {
	case err := <-errc:
		// Run returns only when it could not start (its nfqueue socket) or ctx ended.
		if err != nil && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "kube-network-policies: %v\n", err)
			return 1
		}
	case <-ctx.Done():
		// Run deletes the engine's table on its way out; give it the moment upstream's main does.
		select {
		case <-errc:
		case <-time.After(5 * time.Second):
		}
	}
	return 0
}
