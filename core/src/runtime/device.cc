#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/rendezvous/kv_store.h>
#include <chorus/runtime/device.h>

#include <algorithm>
#include <utility>

#include "runtime/raw_options.h"

namespace chorus {

const char* DeviceKindName(chorus_device_kind kind) {
  switch (kind) {
    case CHORUS_DEVICE_CPU:
      return "cpu";
    case CHORUS_DEVICE_GPU:
      return "gpu";
    case CHORUS_DEVICE_TPU:
      return "tpu";
    case CHORUS_DEVICE_OTHER:
      return "other";
    default:
      break;
  }
  return "unknown";
}

std::shared_ptr<DeviceEnumerator> DeviceEnumerator::Create(std::shared_ptr<PluginLibrary> library,
                                                           const Options& options) {
  if (!library || library->device_enumerator() == nullptr) {
    throw Error(CHORUS_INVALID_ARGUMENT, "plugin '" +
                                             (library ? library->name() : std::string("(null)")) +
                                             "' provides no device enumerator");
  }
  const chorus_device_enumerator_api& api = *library->device_enumerator();
  return Create(std::move(library), api, options);
}

// The chorus_job a context is made for, and what its pointers point to.
struct DeviceEnumerator::JobView {
  std::shared_ptr<const DeviceJob> job;
  std::unique_ptr<CKvStore> store;
  chorus_job raw{};
};

std::string DeviceEnumerator::job_id() const { return job_ ? job_->job->id : std::string(); }

std::shared_ptr<DeviceEnumerator> DeviceEnumerator::Create(std::shared_ptr<PluginLibrary> library,
                                                           const chorus_device_enumerator_api& api,
                                                           const Options& options,
                                                           std::shared_ptr<const DeviceJob> job) {
  if (!library) throw Error(CHORUS_INVALID_ARGUMENT, "device enumerator: no plugin");
  const auto& known = library->device_enumerators();
  if (std::find(known.begin(), known.end(), &api) == known.end()) {
    throw Error(CHORUS_INVALID_ARGUMENT, "device enumerator '" + std::string(api.platform) +
                                             "' is not one of plugin '" + library->name() + "'");
  }
  std::shared_ptr<DeviceEnumerator> self(new DeviceEnumerator());
  self->library_ = std::move(library);
  self->api_ = &api;
  self->platform_ = self->api_->platform;
  if (self->api_->create == nullptr || self->api_->device_count == nullptr ||
      self->api_->device_info == nullptr || self->api_->destroy == nullptr) {
    throw Error(CHORUS_UNSUPPORTED, "device enumerator '" + self->platform_ + "' of plugin '" +
                                        self->library_->name() +
                                        "' lacks create/destroy/count/info");
  }
  const auto raw = internal::RawOptions(options);
  chorus_device_context_create_args args{};
  args.struct_size = sizeof(args);
  args.options = raw.data();
  args.num_options = raw.size();
  args.context = self->api_->context;
  if (job) {
    auto view = std::make_shared<JobView>();
    view->store =
        std::make_unique<CKvStore>(WithPrefix(job->store, "devices/" + self->platform_ + "/"));
    view->raw.struct_size = sizeof(view->raw);
    view->raw.id = job->id.c_str();
    view->raw.task_index = job->task_index;
    view->raw.num_tasks = job->num_tasks;
    view->raw.host_id = job->host_id.c_str();
    view->raw.store = view->store->get();
    view->raw.timeout_ms = job->timeout_ms;
    view->job = std::move(job);
    self->job_ = std::move(view);
    args.job = &self->job_->raw;
  }
  chorus_status status = self->api_->create(&args, &self->context_);
  if (status != CHORUS_OK) {
    self->context_ = nullptr;
    self->Throw(status, "create");
  }
  uint32_t count = 0;
  if ((status = self->api_->device_count(self->context_, &count)) != CHORUS_OK) {
    self->Throw(status, "device_count");
  }
  for (uint32_t i = 0; i < count; ++i) {
    chorus_device_info raw_info{};
    raw_info.struct_size = sizeof(raw_info);
    raw_info.numa_node = -1;
    for (int32_t& c : raw_info.coords) c = -1;
    if ((status = self->api_->device_info(self->context_, i, &raw_info)) != CHORUS_OK) {
      self->Throw(status, "device_info(" + std::to_string(i) + ")");
    }
    DeviceInfo info;
    info.kind = raw_info.kind;
    info.index = i;
    info.name = raw_info.name ? raw_info.name : self->platform_ + ":" + std::to_string(i);
    info.memory_bytes = raw_info.memory_bytes;
    info.numa_node = raw_info.numa_node;
    info.pci_bus_id = raw_info.pci_bus_id ? raw_info.pci_bus_id : "";
    for (int k = 0; k < 4; ++k) info.coords[k] = raw_info.coords[k];
    self->infos_.push_back(std::move(info));
  }
  if (self->api_->describe != nullptr) {
    if (const char* description = self->api_->describe(self->context_)) {
      self->description_ = description;
    }
  }
  return self;
}

DeviceEnumerator::~DeviceEnumerator() {
  if (context_ != nullptr) api_->destroy(context_);
}

void DeviceEnumerator::Throw(chorus_status status, const std::string& what) const {
  throw Error(status, "device enumerator '" + platform_ + "' (plugin " + library_->name() +
                          "): " + what + " failed with " + StatusName(status) + ": " +
                          library_->LastError());
}

const DeviceInfo& DeviceEnumerator::info(uint32_t index) const {
  if (index >= infos_.size()) {
    throw Error(CHORUS_INVALID_ARGUMENT, "device " + std::to_string(index) + " of platform '" +
                                             platform_ + "' does not exist (there are " +
                                             std::to_string(infos_.size()) + ")");
  }
  return infos_[index];
}

void* DeviceEnumerator::Allocate(uint32_t device, size_t bytes) const {
  if (api_->allocate == nullptr) Throw(CHORUS_UNSUPPORTED, "allocate");
  void* out = nullptr;
  chorus_status status = api_->allocate(context_, device, bytes, &out);
  if (status != CHORUS_OK) Throw(status, "allocate(" + std::to_string(bytes) + " bytes)");
  return out;
}

void DeviceEnumerator::Deallocate(uint32_t device, void* pointer) const {
  if (api_->deallocate == nullptr || pointer == nullptr) return;
  chorus_status status = api_->deallocate(context_, device, pointer);
  if (status != CHORUS_OK) Throw(status, "deallocate");
}

void DeviceEnumerator::Copy(uint32_t dst_device, void* dst, uint32_t src_device, const void* src,
                            size_t bytes) const {
  if (api_->copy == nullptr) Throw(CHORUS_UNSUPPORTED, "copy");
  chorus_copy_args args{};
  args.struct_size = sizeof(args);
  args.dst_device = dst_device;
  args.dst = dst;
  args.src_device = src_device;
  args.src = src;
  args.bytes = bytes;
  chorus_status status = api_->copy(context_, &args);
  if (status != CHORUS_OK) Throw(status, "copy");
}

void DeviceEnumerator::Reduce(uint32_t device, void* dst, const void* a, const void* b,
                              size_t count, chorus_dtype dtype, chorus_reduce_op op) const {
  if (api_->reduce == nullptr) Throw(CHORUS_UNSUPPORTED, "reduce");
  chorus_reduce_kernel_args args{};
  args.struct_size = sizeof(args);
  args.device = device;
  args.dst = dst;
  args.a = a;
  args.b = b;
  args.count = count;
  args.dtype = dtype;
  args.op = op;
  chorus_status status = api_->reduce(context_, &args);
  if (status != CHORUS_OK) Throw(status, "reduce");
}

void DeviceEnumerator::Divide(uint32_t device, void* data, size_t count, chorus_dtype dtype,
                              uint64_t divisor) const {
  if (api_->divide == nullptr) Throw(CHORUS_UNSUPPORTED, "divide");
  chorus_divide_args args{};
  args.struct_size = sizeof(args);
  args.device = device;
  args.data = data;
  args.count = count;
  args.dtype = dtype;
  args.divisor = divisor;
  chorus_status status = api_->divide(context_, &args);
  if (status != CHORUS_OK) Throw(status, "divide");
}

void DeviceEnumerator::Synchronize(uint32_t device) const {
  if (api_->synchronize == nullptr) return;
  chorus_status status = api_->synchronize(context_, device, nullptr);
  if (status != CHORUS_OK) Throw(status, "synchronize");
}

DeviceBuffer::DeviceBuffer(Device device, size_t bytes)
    : device_(std::move(device)), bytes_(bytes) {
  data_ = device_.enumerator->Allocate(device_.index, bytes);
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) {
    try {
      device_.enumerator->Deallocate(device_.index, data_);
    } catch (...) {
      // A destructor must not throw; the enumerator already logged nothing we can add to.
    }
  }
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : device_(std::move(other.device_)), data_(other.data_), bytes_(other.bytes_) {
  other.data_ = nullptr;
  other.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    this->~DeviceBuffer();
    new (this) DeviceBuffer(std::move(other));
  }
  return *this;
}

void DeviceBuffer::CopyFromHost(const void* src, size_t bytes, size_t offset) {
  if (offset > bytes_ || bytes > bytes_ - offset) {
    throw Error(CHORUS_INVALID_ARGUMENT, "CopyFromHost: " + std::to_string(bytes) +
                                             " bytes at offset " + std::to_string(offset) +
                                             " into a buffer of " + std::to_string(bytes_));
  }
  device_.enumerator->Copy(device_.index, static_cast<char*>(data_) + offset, CHORUS_HOST_DEVICE,
                           src, bytes);
}

void DeviceBuffer::CopyToHost(void* dst, size_t bytes, size_t offset) const {
  if (offset > bytes_ || bytes > bytes_ - offset) {
    throw Error(CHORUS_INVALID_ARGUMENT, "CopyToHost: " + std::to_string(bytes) +
                                             " bytes at offset " + std::to_string(offset) +
                                             " from a buffer of " + std::to_string(bytes_));
  }
  device_.enumerator->Copy(CHORUS_HOST_DEVICE, dst, device_.index,
                           static_cast<const char*>(data_) + offset, bytes);
}

uint32_t CpuDeviceCountFromEnvironment() {
  return static_cast<uint32_t>(GetEnvInteger("CHORUS_CPU_DEVICES", 1, 1, 1024));
}

}  // namespace chorus
