-- Argo CD health of a kubefn primary (Proxy, SubPool, Site), from the summary kubefn writes on
-- every one of them: Ready, and Reconciling=True (on its way) or Stalled=True (only an edit helps).
-- The same script serves the three kinds. Argo CD opens only the base and table libraries for it:
-- no string.* here.
local hs = {}
if obj.metadata ~= nil and obj.metadata.deletionTimestamp ~= nil then
  hs.status = "Progressing"
  hs.message = "being deleted"
  return hs
end
if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "waiting for kubefn to report status"
  return hs
end
local generation = obj.metadata and obj.metadata.generation
if generation ~= nil and obj.status.observedGeneration ~= generation then
  hs.status = "Progressing"
  hs.message = "waiting for kubefn to observe generation " .. generation
  return hs
end
local byType = {}
for _, condition in ipairs(obj.status.conditions) do
  if condition.type ~= nil then
    byType[condition.type] = condition
  end
end
local function explain(condition)
  local reason = condition.reason or ""
  if condition.message ~= nil and condition.message ~= "" then
    return reason .. ": " .. condition.message
  end
  return reason
end
local stalled = byType["Stalled"]
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = explain(stalled)
  return hs
end
local suspended = byType["Suspended"]
if suspended ~= nil and suspended.status == "True" then
  hs.status = "Suspended"
  hs.message = explain(suspended)
  return hs
end
local ready = byType["Ready"]
if ready == nil then
  hs.status = "Progressing"
  hs.message = "waiting for the Ready condition"
  return hs
end
local reconciling = byType["Reconciling"]
if ready.status == "True" then
  hs.status = "Healthy"
elseif ready.status == "Unknown" or (reconciling ~= nil and reconciling.status == "True") then
  hs.status = "Progressing"
else
  hs.status = "Degraded"
end
hs.message = explain(ready)
return hs
