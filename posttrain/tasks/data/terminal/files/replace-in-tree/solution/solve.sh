#!/bin/bash
find config -type f -name '*.conf' -exec sed -i 's/old-api\.example\.com/api.example.com/g' {} +
