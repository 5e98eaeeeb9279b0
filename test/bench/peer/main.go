// Command peer is the controller-runtime peer of kubefn's SubPool controller for
// `npm run bench -- fleet`: the same derivation written the way controller-runtime's own docs
// (the kubebuilder book) teach it — a manager with default options and leader election on, a
// controller built with For() and Owns() for every owned kind, CreateOrUpdate with a controller
// reference per object, a finalizer, and a status update only when it changed.
//
// It serves its own CRD (group peer.bench.kubefn.dev, the same schema as
// subpools.subrelay.example.com), so that it and kubefn run side by side in one cluster without
// touching each other's pools. Of the objects kubefn derives it creates the Internal-mode set
// (Namespace, credential Secret, ServiceAccount, ConfigMap, ResourceQuota, NetworkPolicy,
// Service, StatefulSet, PodDisruptionBudget); it has no Gateway mode (HTTPRoute), no legacy
// LimitRange clean-up and no proxy-gateway readiness.
//
// Built by the bench (go build, cached in the build cache), never committed as a binary.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

const (
	group        = "peer.bench.kubefn.dev"
	finalizer    = group + "/finalizer"
	managedLabel = "app.kubernetes.io/managed-by"
	managedValue = "subpool-peer"
	poolLabel    = group + "/pool"
	cpaPort      = 8080
	managerPort  = 9090
)

var groupVersion = schema.GroupVersion{Group: group, Version: "v1alpha1"}

type ContainerSpec struct {
	Image     string `json:"image"`
	Resources struct {
		Requests corev1.ResourceList `json:"requests,omitempty"`
		Limits   corev1.ResourceList `json:"limits,omitempty"`
	} `json:"resources"`
}

type SubPoolSpec struct {
	Exposure struct {
		Mode string `json:"mode"`
	} `json:"exposure"`
	Storage struct {
		Size             resource.Quantity `json:"size"`
		StorageClassName string            `json:"storageClassName,omitempty"`
	} `json:"storage"`
	CPA        ContainerSpec `json:"cpa"`
	CPAManager ContainerSpec `json:"cpaManager"`
	Suspend    bool          `json:"suspend,omitempty"`
}

type SubPoolStatus struct {
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Namespace          string             `json:"namespace,omitempty"`
	CPAService         string             `json:"cpaService,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
}

type SubPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              SubPoolSpec   `json:"spec"`
	Status            SubPoolStatus `json:"status,omitempty"`
}

type SubPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SubPool `json:"items"`
}

// deepCopy stands in for controller-gen's generated DeepCopy (a JSON round trip: slower, same result).
func deepCopy[T any](in *T) *T {
	out := new(T)
	b, err := json.Marshal(in)
	if err != nil {
		panic(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		panic(err)
	}
	return out
}

func (in *SubPool) DeepCopyObject() runtime.Object     { return deepCopy(in) }
func (in *SubPoolList) DeepCopyObject() runtime.Object { return deepCopy(in) }

type SubPoolReconciler struct {
	client.Client
	Scheme *runtime.Scheme
}

// +kubebuilder:rbac markers would go here; the bench grants the ClusterRole itself.

func (r *SubPoolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// `npm run bench -- reaction` times a pool's first Reconcile from this line (zap's own ts is whole seconds).
	log.FromContext(ctx).Info("reconcile", "at", time.Now().UTC().Format(time.RFC3339Nano))
	var pool SubPool
	if err := r.Get(ctx, req.NamespacedName, &pool); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	nsName := "subpool-" + pool.Name

	if !pool.DeletionTimestamp.IsZero() {
		if !controllerutil.ContainsFinalizer(&pool, finalizer) {
			return ctrl.Result{}, nil
		}
		var ns corev1.Namespace
		err := r.Get(ctx, client.ObjectKey{Name: nsName}, &ns)
		if err == nil {
			if ns.DeletionTimestamp.IsZero() {
				if err := r.Delete(ctx, &ns); client.IgnoreNotFound(err) != nil {
					return ctrl.Result{}, err
				}
			}
			return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
		}
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		controllerutil.RemoveFinalizer(&pool, finalizer)
		return ctrl.Result{}, r.Update(ctx, &pool)
	}

	if controllerutil.AddFinalizer(&pool, finalizer) {
		if err := r.Update(ctx, &pool); err != nil {
			return ctrl.Result{}, err
		}
	}

	labels := map[string]string{managedLabel: managedValue, poolLabel: pool.Name}
	selector := map[string]string{poolLabel: pool.Name, "app.kubernetes.io/name": "cpa"}
	names := struct{ credentials, config, sa, service, sts, quota, netpol, pdb string }{
		pool.Name + "-credentials", pool.Name + "-config", pool.Name, pool.Name + "-cpa",
		pool.Name + "-cpa-manager", pool.Name + "-quota", pool.Name, pool.Name,
	}
	own := func(obj client.Object, mutate func()) error {
		_, err := controllerutil.CreateOrUpdate(ctx, r.Client, obj, func() error {
			l := obj.GetLabels()
			if l == nil {
				l = map[string]string{}
			}
			for k, v := range labels {
				l[k] = v
			}
			obj.SetLabels(l)
			mutate()
			return controllerutil.SetControllerReference(&pool, obj, r.Scheme)
		})
		return err
	}
	objectMeta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: nsName} }

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName}}
	if err := own(ns, func() {}); err != nil {
		return ctrl.Result{}, err
	}
	secret := &corev1.Secret{ObjectMeta: objectMeta(names.credentials)}
	if err := own(secret, func() {
		if len(secret.Data) == 0 {
			secret.Type = corev1.SecretTypeOpaque
			secret.Data = newCredentials()
		}
	}); err != nil {
		return ctrl.Result{}, err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: objectMeta(names.sa)}
	if err := own(sa, func() { sa.AutomountServiceAccountToken = ptr(false) }); err != nil {
		return ctrl.Result{}, err
	}
	cm := &corev1.ConfigMap{ObjectMeta: objectMeta(names.config)}
	if err := own(cm, func() {
		cm.Data = map[string]string{
			"SUBPOOL_ID":       pool.Name,
			"CPA_PORT":         fmt.Sprint(cpaPort),
			"CPA_MANAGER_PORT": fmt.Sprint(managerPort),
			"PROXY_GATEWAY":    "mihomo.subrelay-system.svc",
		}
	}); err != nil {
		return ctrl.Result{}, err
	}
	quota := &corev1.ResourceQuota{ObjectMeta: objectMeta(names.quota)}
	if err := own(quota, func() {
		quota.Spec.Hard = corev1.ResourceList{
			"requests.cpu":           resource.MustParse("2"),
			"requests.memory":        resource.MustParse("4Gi"),
			"requests.storage":       pool.Spec.Storage.Size,
			"persistentvolumeclaims": resource.MustParse("1"),
		}
	}); err != nil {
		return ctrl.Result{}, err
	}
	netpol := &networkingv1.NetworkPolicy{ObjectMeta: objectMeta(names.netpol)}
	if err := own(netpol, func() {
		tcp := corev1.ProtocolTCP
		netpol.Spec = networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: selector},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}},
				Ports: []networkingv1.NetworkPolicyPort{
					{Protocol: &tcp, Port: ptr(intstr.FromInt32(cpaPort))},
					{Protocol: &tcp, Port: ptr(intstr.FromInt32(managerPort))},
				},
			}},
		}
	}); err != nil {
		return ctrl.Result{}, err
	}
	svc := &corev1.Service{ObjectMeta: objectMeta(names.service)}
	if err := own(svc, func() {
		svc.Spec.Type = corev1.ServiceTypeClusterIP
		svc.Spec.Ports = []corev1.ServicePort{{
			Name: "http", Port: cpaPort, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP,
		}}
		svc.Spec.Selector = selector
	}); err != nil {
		return ctrl.Result{}, err
	}
	sts := &appsv1.StatefulSet{ObjectMeta: objectMeta(names.sts)}
	if err := own(sts, func() {
		replicas := int32(1)
		if pool.Spec.Suspend {
			replicas = 0
		}
		sts.Spec.Replicas = &replicas
		if sts.CreationTimestamp.IsZero() { // immutable after creation
			sts.Spec.ServiceName = names.service
			sts.Spec.Selector = &metav1.LabelSelector{MatchLabels: selector}
			claim := corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: labels},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceStorage: pool.Spec.Storage.Size},
					},
				},
			}
			if pool.Spec.Storage.StorageClassName != "" {
				claim.Spec.StorageClassName = &pool.Spec.Storage.StorageClassName
			}
			sts.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{claim}
		}
		podLabels := map[string]string{}
		for k, v := range labels {
			podLabels[k] = v
		}
		for k, v := range selector {
			podLabels[k] = v
		}
		sts.Spec.Template.Labels = podLabels
		sts.Spec.Template.Spec.ServiceAccountName = names.sa
		want := []corev1.Container{
			container("cpa", pool.Spec.CPA, cpaPort, "http", names),
			container("cpa-manager", pool.Spec.CPAManager, managerPort, "manager", names),
		}
		// Sync the fields we set, keeping what the API server defaulted.
		if len(sts.Spec.Template.Spec.Containers) != len(want) {
			sts.Spec.Template.Spec.Containers = want
			return
		}
		for i := range want {
			c := &sts.Spec.Template.Spec.Containers[i]
			c.Name, c.Image, c.Ports, c.EnvFrom, c.Env, c.Resources, c.VolumeMounts =
				want[i].Name, want[i].Image, want[i].Ports, want[i].EnvFrom, want[i].Env, want[i].Resources, want[i].VolumeMounts
			for j := range c.Ports {
				c.Ports[j].Protocol = corev1.ProtocolTCP
			}
		}
	}); err != nil {
		return ctrl.Result{}, err
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: objectMeta(names.pdb)}
	if err := own(pdb, func() {
		pdb.Spec.MinAvailable = ptr(intstr.FromInt32(1))
		pdb.Spec.Selector = &metav1.LabelSelector{MatchLabels: selector}
	}); err != nil {
		return ctrl.Result{}, err
	}

	before := pool.Status.DeepCopyStatus()
	pool.Status.ObservedGeneration = pool.Generation
	pool.Status.Namespace = nsName
	pool.Status.CPAService = fmt.Sprintf("%s.%s.svc:%d", names.service, nsName, cpaPort)
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "StatefulSetNotReady",
		Message: fmt.Sprintf("StatefulSet has %d/1 ready replicas", sts.Status.ReadyReplicas), ObservedGeneration: pool.Generation}
	if sts.Status.ReadyReplicas >= 1 {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionTrue, "Ready", "every owned object is in place and the StatefulSet is ready"
	}
	meta.SetStatusCondition(&pool.Status.Conditions, ready)
	if !equality.Semantic.DeepEqual(before, pool.Status) {
		if err := r.Status().Update(ctx, &pool); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

func (s SubPoolStatus) DeepCopyStatus() SubPoolStatus { return *deepCopy(&s) }

func container(name string, spec ContainerSpec, port int32, portName string, names struct{ credentials, config, sa, service, sts, quota, netpol, pdb string }) corev1.Container {
	secretEnv := func(env, key string) corev1.EnvVar {
		return corev1.EnvVar{Name: env, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: names.credentials}, Key: key}}}
	}
	return corev1.Container{
		Name:         name,
		Image:        spec.Image,
		Ports:        []corev1.ContainerPort{{Name: portName, ContainerPort: port, Protocol: corev1.ProtocolTCP}},
		EnvFrom:      []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: names.config}}}},
		Env:          []corev1.EnvVar{secretEnv("CPA_USERNAME", "username"), secretEnv("CPA_PASSWORD", "password")},
		Resources:    corev1.ResourceRequirements{Requests: spec.Resources.Requests, Limits: spec.Resources.Limits},
		VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
	}
}

func newCredentials() map[string][]byte {
	user, pass := make([]byte, 6), make([]byte, 32)
	_, _ = rand.Read(user)
	_, _ = rand.Read(pass)
	return map[string][]byte{"username": []byte("cpa-" + hex.EncodeToString(user)), "password": []byte(hex.EncodeToString(pass))}
}

func ptr[T any](v T) *T { return &v }

// SetupWithManager is the docs' wiring: For the primary, Owns every kind it creates.
func (r *SubPoolReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&SubPool{}).
		Owns(&corev1.Namespace{}).
		Owns(&corev1.Secret{}).
		Owns(&corev1.ServiceAccount{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.ResourceQuota{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Owns(&corev1.Service{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Complete(r)
}

func main() {
	ctrl.SetLogger(zap.New())
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	scheme.AddKnownTypes(groupVersion, &SubPool{}, &SubPoolList{})
	metav1.AddToGroupVersion(scheme, groupVersion)

	leaseNamespace := os.Getenv("PEER_LEASE_NAMESPACE")
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                  scheme,
		LeaderElection:          true,
		LeaderElectionID:        "subpool-peer." + group,
		LeaderElectionNamespace: leaseNamespace,
		// The one departure from the defaults: no metrics listener (the bench runs several
		// processes on one machine; serving metrics costs no API requests either way).
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
	if err := (&SubPoolReconciler{Client: mgr.GetClient(), Scheme: scheme}).SetupWithManager(mgr); err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		os.Exit(1)
	}
	go func() {
		<-mgr.Elected()
		fmt.Println("peer elected")
	}()
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
}
