package kubernetes

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// ProbePullSecrets asks a kubernetes target's cluster whether each of its image_pull_secrets
// exists in the namespace and is a registry credential (type kubernetes.io/dockerconfigjson
// or kubernetes.io/dockercfg): a pod naming a missing one still starts, and fails later with
// ErrImagePull, far from the setting that caused it. It reads no Secret's data.
func ProbePullSecrets(ctx context.Context, kubeconfig, kubeContext, namespace string, names []string) error {
	if len(names) == 0 {
		return nil
	}
	cfg, err := restConfig(kubeconfig, kubeContext)
	if err != nil {
		return err
	}
	c, err := newRESTCluster(cfg)
	if err != nil {
		return err
	}
	return probePullSecrets(ctx, c.core, redactedHost(cfg.Host), namespace, names)
}

// pullSecretTypes are the Secret types the kubelet reads registry credentials from.
var pullSecretTypes = [...]corev1.SecretType{corev1.SecretTypeDockerConfigJson, corev1.SecretTypeDockercfg}

// probePullSecrets checks each name as ProbePullSecrets says, all of them, and joins the
// findings.
//
// The check is a dry-run JSON patch whose only operation tests the Secret's type, answered as
// metadata only: the Role in docs/providers-k8s.md grants agora `patch` on secrets (to make a
// Job their owner) but neither `get` nor `list`, on purpose (agora writes Secrets and never
// reads them back). A dry run changes nothing; a patch of a missing Secret is 404, one whose
// type differs fails its test with 422, and the answer's body (the object's metadata: a
// kubectl-applied Secret's annotation can hold its data) is closed unread. So no new RBAC,
// and no Secret's content ever reaches agora's memory through a decoder or a message.
func probePullSecrets(ctx context.Context, core rest.Interface, server, namespace string, names []string) error {
	var errs []error
	for _, n := range names {
		if err := probePullSecret(ctx, core, server, namespace, n); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func probePullSecret(ctx context.Context, core rest.Interface, server, namespace, name string) error {
	for _, typ := range pullSecretTypes {
		patch := fmt.Appendf(nil, `[{"op":"test","path":"/type","value":%q}]`, typ)
		body, err := core.Patch(types.JSONPatchType).Namespace(namespace).Resource("secrets").Name(name).
			Param("dryRun", "All").
			SetHeader("Accept", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1").
			Body(patch).Stream(ctx)
		switch {
		case err == nil:
			body.Close() // unread: the type is what the test operation answered
			return nil
		case apierrors.IsNotFound(err):
			return fmt.Errorf("image pull secret %q does not exist in namespace %q (the cluster's operator makes it: kubectl create secret docker-registry)", name, namespace)
		case apierrors.IsInvalid(err):
			continue // not this type
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
			return fmt.Errorf("the API server at %s refuses agora's account a dry-run patch of secret %q in namespace %q (the Role in docs/providers-k8s.md grants patch on secrets): %w", server, name, namespace, err)
		default:
			return fmt.Errorf("the API server at %s: check image pull secret %q in namespace %q: %w", server, name, namespace, err)
		}
	}
	return fmt.Errorf("image pull secret %q in namespace %q is not of type %s or %s: the kubelet reads no registry credential from it", name, namespace, pullSecretTypes[0], pullSecretTypes[1])
}
