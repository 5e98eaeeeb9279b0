package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

const nodeName = "devnode"

// simNode plays the kubelet of one Node, "devnode": it keeps the Node Ready (status heartbeat
// and Lease), binds unscheduled Pods to itself (there is no scheduler), reports them Running with
// a loopback address of their own (127.1.x.y: Linux routes all of 127/8 to lo, so a test can
// bind a real server there), and completes deletions the way a kubelet does (grace period 0
// once the containers are "stopped").
type simNode struct {
	client  kubernetes.Interface
	proxies *podProxies
	claims  corelisters.PersistentVolumeClaimLister

	mu             sync.Mutex
	ips            map[types.UID]string
	inUse          map[string]bool
	nextIP         uint32
	nextWorkloadIP uint32
}

func newSimNode(client kubernetes.Interface, proxies *podProxies) *simNode {
	// A random first address: devclusters started side by side (parallel test files) would
	// otherwise all hand their first proxy Pod 127.1.0.1 and collide on its port.
	return &simNode{client: client, proxies: proxies, ips: map[types.UID]string{}, inUse: map[string]bool{},
		nextIP: rand.Uint32N(256 * 254)}
}

// errVolumesPending: a Pod waits (as a scheduler would) until its volume claims are bound.
var errVolumesPending = errors.New("volume claims not bound yet")

func (n *simNode) nodeObject() *corev1.Node {
	now := metav1.Now()
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{
			"kubernetes.io/hostname": nodeName, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
			"node-role.kubernetes.io/devcluster": "",
		}},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"),
				corev1.ResourcePods: resource.MustParse("10000"), corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
			},
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"),
				corev1.ResourcePods: resource.MustParse("10000"), corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
			},
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "devcluster simulated node",
					LastHeartbeatTime: now, LastTransitionTime: now},
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastHeartbeatTime: now, LastTransitionTime: now},
				{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", LastHeartbeatTime: now, LastTransitionTime: now},
				{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", LastHeartbeatTime: now, LastTransitionTime: now},
			},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: "127.0.0.1"},
				{Type: corev1.NodeHostName, Address: nodeName},
			},
			NodeInfo: corev1.NodeSystemInfo{
				KubeletVersion: kubeVersion(), OperatingSystem: "linux", Architecture: "amd64",
				ContainerRuntimeVersion: "devcluster://simulated",
			},
		},
	}
}

// register creates the Node (and its Lease) and sets its status Ready.
func (n *simNode) register(ctx context.Context) error {
	node := n.nodeObject()
	created, err := n.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = n.client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("create node: %w", err)
	}
	created.Status = node.Status
	if _, err := n.client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("node status: %w", err)
	}
	return n.renewLease(ctx)
}

func (n *simNode) renewLease(ctx context.Context) error {
	leases := n.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	l, err := leases.Get(ctx, nodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: nodeName},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(nodeName), LeaseDurationSeconds: ptr.To[int32](40),
				RenewTime: &now},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	l.Spec.RenewTime = &now
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}

func (n *simNode) heartbeat(ctx context.Context) {
	// Lease every 10s like a kubelet; status every minute (refreshes the Ready heartbeat).
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := n.renewLease(ctx); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "devnode lease renew")
		}
	}, 10*time.Second)
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		node, err := n.client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_ = n.register(ctx)
			return
		}
		if err != nil {
			return
		}
		now := metav1.Now()
		for i := range node.Status.Conditions {
			node.Status.Conditions[i].LastHeartbeatTime = now
			if node.Status.Conditions[i].Type == corev1.NodeReady && node.Status.Conditions[i].Status != corev1.ConditionTrue {
				node.Status.Conditions[i].Status = corev1.ConditionTrue
				node.Status.Conditions[i].LastTransitionTime = now
			}
		}
		if _, err := n.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "devnode status heartbeat")
		}
	}, time.Minute)
}

// allocIP hands out consecutive addresses from a random start in 127.1.0.1-127.1.255.254
// (skipping .0 and .255 in the last octet), moving on to 127.2 and beyond, and reusing addresses
// of deleted pods only after the 127.1-127.254 space wraps around. Pods of
// workload controllers get 10.244.x.y instead (see workloadPod).
func (n *simNode) allocIP(uid types.UID, workload bool) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ip, ok := n.ips[uid]; ok {
		return ip
	}
	for {
		var ip string
		if workload {
			v := n.nextWorkloadIP
			n.nextWorkloadIP = (n.nextWorkloadIP + 1) % (256 * 254)
			ip = fmt.Sprintf("10.244.%d.%d", v/254, 1+v%254)
		} else {
			v := n.nextIP
			n.nextIP = (n.nextIP + 1) % (254 * 256 * 254)
			a := 1 + v/(256*254)
			b := (v / 254) % 256
			c := 1 + v%254
			ip = fmt.Sprintf("127.%d.%d.%d", a, b, c)
		}
		if !n.inUse[ip] {
			n.inUse[ip] = true
			n.ips[uid] = ip
			return ip
		}
	}
}

// workloadPod: a Pod of a ReplicaSet, StatefulSet, DaemonSet or Job that does not run kubefn's
// proxy image. Such Pods are what Services select, and the API server refuses loopback addresses
// in EndpointSlices, so they get an address on a pretend pod network (10.244.0.0/16) that
// nothing serves; Pods created directly (kubefn's pod provider, tests) and proxy-image Pods keep
// a loopback address where a real server can listen.
func (n *simNode) workloadPod(pod *corev1.Pod) bool {
	if n.proxies.proxyPort(pod) != 0 {
		return false
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		switch ref.Kind {
		case "ReplicaSet", "StatefulSet", "DaemonSet", "Job":
			return true
		}
	}
	return false
}

func (n *simNode) releaseIP(uid types.UID) {
	n.proxies.stop(uid)
	n.mu.Lock()
	defer n.mu.Unlock()
	if ip, ok := n.ips[uid]; ok {
		delete(n.inUse, ip)
		delete(n.ips, uid)
	}
}

func (n *simNode) run(ctx context.Context) {
	factory := informers.NewSharedInformerFactory(n.client, 0)
	podInformer := factory.Core().V1().Pods()
	n.claims = factory.Core().V1().PersistentVolumeClaims().Lister()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	_, _ = podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				n.releaseIP(p.UID)
			} else if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				if p, ok := t.Obj.(*corev1.Pod); ok {
					n.releaseIP(p.UID)
				}
			}
		},
	})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go func() { <-ctx.Done(); queue.ShutDown(); n.proxies.stopAll() }()
	lister := podInformer.Lister()
	for i := 0; i < 4; i++ {
		go func() {
			for {
				key, quit := queue.Get()
				if quit {
					return
				}
				ns, name, _ := cache.SplitMetaNamespaceKey(key)
				pod, err := lister.Pods(ns).Get(name)
				if err == nil {
					err = n.syncPod(ctx, pod)
				} else if apierrors.IsNotFound(err) {
					err = nil
				}
				if errors.Is(err, errVolumesPending) {
					queue.Forget(key)
					queue.AddAfter(key, 250*time.Millisecond)
				} else if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
					klog.V(2).InfoS("devnode pod sync failed; retrying", "pod", key, "err", err)
					queue.AddRateLimited(key)
				} else {
					queue.Forget(key)
				}
				queue.Done(key)
			}
		}()
	}
}

func (n *simNode) syncPod(ctx context.Context, pod *corev1.Pod) error {
	pods := n.client.CoreV1().Pods(pod.Namespace)
	if pod.DeletionTimestamp != nil {
		if pod.Spec.NodeName != "" && pod.Spec.NodeName != nodeName {
			return nil
		}
		// Containers "stop" at once; the kubelet then deletes with grace period 0.
		n.proxies.stop(pod.UID)
		err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To[int64](0),
			Preconditions:      &metav1.Preconditions{UID: &pod.UID},
		})
		if apierrors.IsConflict(err) {
			return nil
		}
		return err
	}
	if pod.Spec.NodeName == "" {
		if pod.Spec.SchedulerName != "" && pod.Spec.SchedulerName != corev1.DefaultSchedulerName {
			return nil // someone else's scheduler
		}
		if !n.claimsBound(pod) {
			return errVolumesPending
		}
		return pods.Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: nodeName},
		}, metav1.CreateOptions{})
	}
	if pod.Spec.NodeName != nodeName {
		return nil
	}
	if pod.Status.Phase == corev1.PodRunning {
		// After a restart on a kept data dir: the proxy "container" runs again.
		if err := n.proxies.ensure(pod, pod.Status.PodIP); err != nil {
			klog.ErrorS(err, "devnode")
		}
		return nil
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil
	}
	ip := n.allocIP(pod.UID, n.workloadPod(pod))
	// The Pod reports Running only once its forward proxy (if it runs the proxy image) listens.
	if err := n.proxies.ensure(pod, ip); err != nil {
		klog.ErrorS(err, "devnode")
	}
	now := metav1.Now()
	started := metav1.NewTime(now.Add(-time.Millisecond))
	status := pod.Status.DeepCopy()
	status.Phase = corev1.PodRunning
	status.HostIP = "127.0.0.1"
	status.HostIPs = []corev1.HostIP{{IP: "127.0.0.1"}}
	status.PodIP = ip
	status.PodIPs = []corev1.PodIP{{IP: ip}}
	status.StartTime = &started
	status.QOSClass = qosClass(pod)
	status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	status.InitContainerStatuses = nil
	for _, c := range pod.Spec.InitContainers {
		status.InitContainerStatuses = append(status.InitContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "devcluster://" + c.Image, ContainerID: "devcluster://" + string(pod.UID) + "/" + c.Name,
			Ready: true, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: started, FinishedAt: started}},
		})
	}
	status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		status.ContainerStatuses = append(status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "devcluster://" + c.Image, ContainerID: "devcluster://" + string(pod.UID) + "/" + c.Name,
			Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		})
	}
	p := pod.DeepCopy()
	p.Status = *status
	_, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return nil // a newer version is queued
	}
	return err
}

// claimsBound: every PersistentVolumeClaim the Pod mounts exists and is Bound.
func (n *simNode) claimsBound(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		c, err := n.claims.PersistentVolumeClaims(pod.Namespace).Get(v.PersistentVolumeClaim.ClaimName)
		if err != nil || c.Status.Phase != corev1.ClaimBound {
			return false
		}
	}
	return true
}

func qosClass(pod *corev1.Pod) corev1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	hasAny := false
	for _, c := range pod.Spec.Containers {
		if len(c.Resources.Requests) > 0 || len(c.Resources.Limits) > 0 {
			hasAny = true
		}
	}
	if !hasAny {
		return corev1.PodQOSBestEffort
	}
	return corev1.PodQOSBurstable
}
