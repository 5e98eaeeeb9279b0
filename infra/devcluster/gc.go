package main

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	cacheddiscovery "k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"
)

// gcDiscoveryPeriod is how often the garbage collector looks for new resource types. The
// kube-controller-manager hard-codes 30s, so a dependent of an object whose CRD was installed a
// moment ago would wait up to 30s for its owner's deletion to cascade: tests install CRDs and
// delete owners within seconds. The collector is otherwise the upstream one, run as kcm runs it.
const gcDiscoveryPeriod = 2 * time.Second

func runGarbageCollector(ctx context.Context, cfg *rest.Config, workers int) error {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 200, 400
	client, err := kubernetes.NewForConfig(rest.AddUserAgent(cfg, "generic-garbage-collector"))
	if err != nil {
		return err
	}
	metadataClient, err := metadata.NewForConfig(cfg)
	if err != nil {
		return err
	}
	discoveryClient, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	restMapper := restmapper.NewDeferredDiscoveryRESTMapper(cacheddiscovery.NewMemCacheClient(discoveryClient))
	sharedInformers := informers.NewSharedInformerFactory(client, 12*time.Hour)
	metadataInformers := metadatainformer.NewSharedInformerFactory(metadataClient, 12*time.Hour)
	factory := informerfactory.NewInformerFactory(sharedInformers, metadataInformers)
	ignored := map[schema.GroupResource]struct{}{}
	for r := range garbagecollector.DefaultIgnoredResources() {
		ignored[r] = struct{}{}
	}
	informersStarted := make(chan struct{})
	gc, err := garbagecollector.NewGarbageCollector(ctx, client, metadataClient, restMapper, ignored, factory, informersStarted)
	if err != nil {
		return err
	}
	sharedInformers.Start(ctx.Done())
	metadataInformers.Start(ctx.Done())
	close(informersStarted)
	go gc.Sync(ctx, discoveryClient, gcDiscoveryPeriod)
	klog.InfoS("garbage collector started", "discoveryPeriod", gcDiscoveryPeriod)
	gc.Run(ctx, workers, 30*time.Second)
	return nil
}
