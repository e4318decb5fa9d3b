#!/usr/bin/env bash
# Build the collection tarball and check every plugin renders with ansible-doc.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
ansible-galaxy collection build --force --output-path "$out" . >/dev/null
ls "$out"/gpufleet-serving-*.tar.gz >/dev/null
echo "built $(basename "$out"/gpufleet-serving-*.tar.gz)"
# awx/ ships as data (job templates, surveys, workflow, project skeleton: docs/awx.md).
# (listed once: `tar | grep -q` under pipefail fails when grep exits before tar has written everything)
listing=$(tar tzf "$out"/gpufleet-serving-*.tar.gz)
for f in awx/import.yml awx/job_templates.yml awx/workflow.yml awx/project/gpufleet/apply.yml; do
  grep -qx "$f" <<<"$listing" || { echo "the tarball lacks $f" >&2; exit 1; }
done

# What the README tells a user to do from their own repository: install the tarball beside an inventory (no Galaxy:
# --no-deps, the ansible package ships the dependencies) and run the playbooks by their fully qualified names, with
# nothing of this checkout on the collections path.
user="$out/user-repo"
mkdir -p "$user"
cp -r inventories/example "$user/inventory"
sed -i '/^gpufleet_render_dir:/d' "$user/inventory/group_vars/all/mode.yml"  # the role's default: <inventory>/rendered
printf '[defaults]\ncollections_path = ./collections\n' >"$user/ansible.cfg"
(
  cd "$user"
  env -u ANSIBLE_COLLECTIONS_PATH -u ANSIBLE_COLLECTIONS_SCAN_SYS_PATH ANSIBLE_CONFIG="$user/ansible.cfg" \
    ansible-galaxy collection install --no-deps -p ./collections "$out"/gpufleet-serving-*.tar.gz >/dev/null
  for pb in validate deploy; do
    env -u ANSIBLE_COLLECTIONS_PATH -u ANSIBLE_COLLECTIONS_SCAN_SYS_PATH ANSIBLE_CONFIG="$user/ansible.cfg" \
      ansible-playbook -i inventory "gpufleet.serving.$pb" >"$out/$pb.log" 2>&1 \
      || { tail -40 "$out/$pb.log"; echo "installed collection: gpufleet.serving.$pb failed" >&2; exit 1; }
  done
  ls inventory/rendered/*/*/*.yaml >/dev/null \
    || { echo "installed collection: deploy wrote nothing under inventory/rendered" >&2; exit 1; }
)
echo "installed tarball: gpufleet.serving.validate and gpufleet.serving.deploy by FQCN from a user repository: ok"
for f in plugins/modules/*.py; do
  name=$(basename "$f" .py)
  ansible-doc -t module "gpufleet.serving.$name" >/dev/null
  echo "ansible-doc module gpufleet.serving.$name: ok"
done
# One YAML doc sidecar per filter (a .py file may hold several filters).
for f in plugins/filter/*.yml; do
  [ -e "$f" ] || continue
  name=$(basename "$f" .yml)
  ansible-doc -t filter "gpufleet.serving.$name" >/dev/null
  echo "ansible-doc filter gpufleet.serving.$name: ok"
done
for f in plugins/callback/*.py; do
  [ -e "$f" ] || continue
  name=$(basename "$f" .py)
  ansible-doc -t callback "gpufleet.serving.$name" >/dev/null
  echo "ansible-doc callback gpufleet.serving.$name: ok"
done
for r in roles/*/; do
  [ -d "$r/meta" ] || continue
  name=$(basename "$r")
  ansible-doc -t role "gpufleet.serving.$name" >/dev/null
  echo "ansible-doc role gpufleet.serving.$name: ok"
done
antsibull-changelog lint
