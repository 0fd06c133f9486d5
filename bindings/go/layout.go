package brisk

/*
#include "brisk.h"
*/
import "C"

// cSizes is what cgo sees of brisk.h, for the test that compares it with the
// C compiler's layouts (cgo is not allowed in _test.go files).
func cSizes() map[string]uintptr {
	return map[string]uintptr{
		"brisk_model_params":     C.sizeof_brisk_model_params,
		"brisk_context_params":   C.sizeof_brisk_context_params,
		"brisk_sampler_params":   C.sizeof_brisk_sampler_params,
		"brisk_stopper_params":   C.sizeof_brisk_stopper_params,
		"brisk_engine_params":    C.sizeof_brisk_engine_params,
		"brisk_request_params":   C.sizeof_brisk_request_params,
		"brisk_engine_step_info": C.sizeof_brisk_engine_step_info,
		"brisk_engine_counters":  C.sizeof_brisk_engine_counters,
		"brisk_engine_event":     C.sizeof_brisk_engine_event,
		"brisk_chat_message":     C.sizeof_brisk_chat_message,
	}
}
