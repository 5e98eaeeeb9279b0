package main

import (
	"context"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// Storage on the devcluster: one default StorageClass, "standard", whose volumes a minimal
// external provisioner (this file) creates as hostPath PersistentVolumes. Binding is done by the
// upstream persistentvolume-binder controller, as in any cluster: it marks a claim of this class
// with volume.kubernetes.io/storage-provisioner, the provisioner creates a PV pre-bound to the
// claim (claimRef with UID), and the binder binds both. A Released volume is deleted (reclaim
// policy Delete). Nothing is written to disk: Pods never run (see node.go).
const (
	storageClassName = "standard"
	provisionerName  = "devcluster.kubefn.dev/hostpath"
)

const (
	annStorageProvisioner = "volume.kubernetes.io/storage-provisioner"
	annProvisionedBy      = "pv.kubernetes.io/provisioned-by"
	annDefaultClass       = "storageclass.kubernetes.io/is-default-class"
)

func ensureStorageClass(ctx context.Context, client kubernetes.Interface) error {
	_, err := client.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: storageClassName, Annotations: map[string]string{annDefaultClass: "true"}},
		Provisioner:       provisionerName,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// runProvisioner provisions claims handed to provisionerName and deletes their volumes once
// released.
func runProvisioner(ctx context.Context, client kubernetes.Interface, volumeDir string) {
	factory := informers.NewSharedInformerFactory(client, 0)
	claims := factory.Core().V1().PersistentVolumeClaims()
	volumes := factory.Core().V1().PersistentVolumes()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	enqueue := func(prefix string) func(any) {
		return func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				queue.Add(prefix + key)
			}
		}
	}
	handler := func(prefix string) cache.ResourceEventHandlerFuncs {
		return cache.ResourceEventHandlerFuncs{AddFunc: enqueue(prefix), UpdateFunc: func(_, o any) { enqueue(prefix)(o) }}
	}
	_, _ = claims.Informer().AddEventHandler(handler("pvc:"))
	_, _ = volumes.Informer().AddEventHandler(handler("pv:"))
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go func() { <-ctx.Done(); queue.ShutDown() }()

	sync := func(key string) error {
		if name, ok := strings.CutPrefix(key, "pv:"); ok {
			pv, err := volumes.Lister().Get(name)
			if err != nil {
				return nil
			}
			if pv.Annotations[annProvisionedBy] != provisionerName || pv.Status.Phase != corev1.VolumeReleased ||
				pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || pv.DeletionTimestamp != nil {
				return nil
			}
			err = client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{
				Preconditions: &metav1.Preconditions{UID: &pv.UID},
			})
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				return nil
			}
			return err
		}
		nsName, _ := strings.CutPrefix(key, "pvc:")
		ns, name, _ := cache.SplitMetaNamespaceKey(nsName)
		claim, err := claims.Lister().PersistentVolumeClaims(ns).Get(name)
		if err != nil {
			return nil
		}
		if claim.Annotations[annStorageProvisioner] != provisionerName || claim.Spec.VolumeName != "" ||
			claim.DeletionTimestamp != nil {
			return nil
		}
		pvName := "pvc-" + string(claim.UID)
		if _, err := volumes.Lister().Get(pvName); err == nil {
			return nil
		}
		class := storageClassName
		if claim.Spec.StorageClassName != nil {
			class = *claim.Spec.StorageClassName
		}
		accessModes := claim.Spec.AccessModes
		if len(accessModes) == 0 {
			accessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: pvName, Annotations: map[string]string{annProvisionedBy: provisionerName}},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: claim.Spec.Resources.Requests[corev1.ResourceStorage]},
				AccessModes:                   accessModes,
				VolumeMode:                    claim.Spec.VolumeMode,
				StorageClassName:              class,
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
				ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
					Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID},
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: filepath.Join(volumeDir, pvName), Type: ptr.To(corev1.HostPathDirectoryOrCreate)}},
			},
		}
		_, err = client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		if err == nil {
			klog.V(2).InfoS("provisioned volume", "pv", pvName, "claim", klog.KObj(claim))
		}
		return err
	}
	go func() {
		for {
			key, quit := queue.Get()
			if quit {
				return
			}
			if err := sync(key); err != nil && ctx.Err() == nil {
				klog.V(2).InfoS("provisioner sync failed; retrying", "key", key, "err", err)
				queue.AddRateLimited(key)
			} else {
				queue.Forget(key)
			}
			queue.Done(key)
		}
	}()
	<-ctx.Done()
}
